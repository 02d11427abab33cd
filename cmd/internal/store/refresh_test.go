package store

import (
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/httpapi"
)

// TestRefreshTakesOtherReplicasChanges: two stores on one database, as two replicas on one
// PostgreSQL (and two processes on one SQLite file). What one replica's admin API changes,
// the other's Refresh takes: a new key (on PostgreSQL at its first use already), its
// limits, a rotation with its grace, a revocation (named once, for its waiting calls), and a
// config key's name stays the config key's.
func TestRefreshTakesOtherReplicasChanges(t *testing.T) {
	engines(t, func(t *testing.T, o Options) {
		ctx := context.Background()
		c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
		a, b := open(t, o, c), open(t, o, c)
		defer a.Close(ctx)
		defer b.Close(ctx)
		refresh := func(want ...string) {
			t.Helper()
			got, err := b.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Refresh named %q revoked, want %q", got, want)
			}
		}
		resolves := func(secret string) bool {
			_, ok := b.ResolveDigest(ctx, sha256.Sum256([]byte(secret)))
			return ok
		}

		_, secret, err := a.CreateKey(ctx, "bob", httpapi.KeyLimits{Weight: 2, MaxRunning: 1})
		if err != nil {
			t.Fatal(err)
		}
		if b.Any() {
			t.Fatal("the other replica knew a key existed before it looked")
		}
		// A shared database (PostgreSQL) is asked for a secret the replica does not know;
		// a SQLite file is not shared between replicas, and waits for the refresh.
		if got, shared := resolves(secret), o.Postgres != ""; got != shared {
			t.Fatalf("before a refresh bob's secret resolves %v on the other replica, want %v", got, shared)
		}
		refresh()
		if ck, ok := b.ResolveDigest(ctx, sha256.Sum256([]byte(secret))); !ok || ck.Client.Weight != 2 || ck.Client.MaxRunning != 1 || !b.Any() {
			t.Fatalf("after a refresh bob resolves to %+v, %v", ck, ok)
		}
		b.Used("bob", c.Now())

		if _, err := a.PatchKey(ctx, "bob", httpapi.KeyPatch{Limits: httpapi.KeyLimits{MaxRunning: 4},
			Set: map[string]bool{"max_running": true}}); err != nil {
			t.Fatal(err)
		}
		_, secret2, err := a.RotateKey(ctx, "bob", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		refresh()
		if ck, _ := b.ResolveDigest(ctx, sha256.Sum256([]byte(secret2))); ck.Client.MaxRunning != 4 {
			t.Errorf("after a patch and a rotation the new secret resolves to %+v", ck)
		}
		if !resolves(secret) {
			t.Error("the old secret is refused within its grace")
		}
		c.Add(time.Minute)
		if resolves(secret) {
			t.Error("the old secret is accepted after its grace")
		}
		keys, _ := b.ListKeys(ctx)
		if i := slices.IndexFunc(keys, func(k httpapi.KeyInfo) bool { return k.Name == "bob" }); i < 0 || keys[i].LastUsedAt == nil {
			t.Errorf("bob lost its place (last use) in the refresh: %+v", keys)
		}

		if _, err := a.RevokeKey(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		refresh("bob")
		if resolves(secret2) {
			t.Error("a key revoked on the other replica still resolves")
		}
		refresh() // named once

		// A run-time key named as a config key on this replica only stays the config key.
		if _, err := a.db.ExecContext(ctx, a.q(`UPDATE client_keys SET name='alice' WHERE name='bob'`)); err != nil {
			t.Fatal(err)
		}
		refresh()
		if keys, _ := b.ListKeys(ctx); len(keys) != 2 || keys[0].Source != "config" {
			t.Errorf("keys = %+v", keys)
		}
	})
}
