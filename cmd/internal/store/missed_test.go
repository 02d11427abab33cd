package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/internal/store/pgtest"
	"github.com/tollgate/tollgate/httpapi"
)

// TestMissedDigestLookup: on a shared database a secret the replica does not know is looked
// up there, bounded: a digest the database did not have is not asked again for a second
// (a key row that appears meanwhile resolves only after it), the replica asks at most
// missedRate digests a second (past that a key it has not seen is refused until the next
// second), and a key it knows by name rotated elsewhere is left to the refresh.
func TestMissedDigestLookup(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	o := Options{Postgres: pgtest.Start(t)}
	a, b := open(t, o, c), open(t, o, c)
	defer a.Close(ctx)
	defer b.Close(ctx)
	resolves := func(secret string) bool {
		_, ok := b.ResolveDigest(ctx, sha256.Sum256([]byte(secret)))
		return ok
	}
	// A key row written with a secret of the test's own choosing, as another replica would.
	insert := func(name, secret string) {
		t.Helper()
		d := sha256.Sum256([]byte(secret))
		if _, err := a.db.ExecContext(ctx, `INSERT INTO client_keys (name, digest, weight, max_running, max_queued,
			rpm, tpm, models, max_priority, created_at) VALUES ($1,$2,1,0,0,0,0,'[]','',$3)`, name, hex.EncodeToString(d[:]), ms(c.Now())); err != nil {
			t.Fatal(err)
		}
	}

	if resolves("tg-not-yet") {
		t.Fatal("a secret nobody made resolved")
	}
	insert("carol", "tg-not-yet")
	if resolves("tg-not-yet") {
		t.Error("a digest the database did not have was asked again within the second")
	}
	c.Add(missedFor)
	if !resolves("tg-not-yet") {
		t.Error("carol's key, made elsewhere, did not resolve a second after its digest was unknown")
	}

	c.Add(time.Second) // a full second's worth of lookups again
	for i := range missedRate {
		if resolves(fmt.Sprint("tg-wrong-", i)) {
			t.Fatalf("wrong secret %d resolved", i)
		}
	}
	insert("dave", "tg-dave")
	if resolves("tg-dave") {
		t.Error("a lookup past the rate cap was made")
	}
	c.Add(time.Second)
	if !resolves("tg-dave") {
		t.Error("dave's key did not resolve once the cap had room again")
	}

	// Bob is known here; his rotation elsewhere is taken by the refresh, not by a lookup.
	if _, _, err := a.CreateKey(ctx, "bob", httpapi.KeyLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	_, rotated, err := a.RotateKey(ctx, "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	if resolves(rotated) {
		t.Error("bob's rotated secret was taken by a lookup, not left to the refresh")
	}
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !resolves(rotated) {
		t.Error("bob's rotated secret did not resolve after the refresh")
	}
}
