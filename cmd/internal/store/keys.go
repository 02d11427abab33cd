package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"time"

	"github.com/tollgate/tollgate/httpapi"
	"github.com/tollgate/tollgate/providers/llm"
)

// key is one client key as the store holds it in memory.
type key struct {
	name      string
	config    bool
	limits    httpapi.KeyLimits
	digest    [32]byte
	oldDigest [32]byte  // the secret before a rotation, valid until oldUntil
	oldUntil  time.Time // zero: no old secret
	created   time.Time
	lastUsed  time.Time
	revoked   bool
	spend     spend
}

var keyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ResolveDigest returns the live run-time key whose secret (or, within its rotation grace,
// previous secret) has digest d. On a shared database a digest this replica does not know
// is looked up there (lookupMissed): a key made on another replica works at once.
func (s *Store) ResolveDigest(ctx context.Context, d [sha256.Size]byte) (httpapi.ClientKey, bool) {
	ck, ok, known := s.resolveLocal(d)
	if known || s.missed == nil {
		return ck, ok
	}
	s.lookupMissed(ctx, d)
	ck, ok, _ = s.resolveLocal(d)
	return ck, ok
}

// resolveLocal is ResolveDigest from the keys in memory; known reports whether d is a
// secret of one of them, live or not.
func (s *Store) resolveLocal(d [sha256.Size]byte) (ck httpapi.ClientKey, ok, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.byHash[d]
	if k == nil {
		return httpapi.ClientKey{}, false, false
	}
	if k.revoked || k.config || d != k.digest && !s.opts.Now().Before(k.oldUntil) {
		return httpapi.ClientKey{}, false, true
	}
	return clientKey(k.name, &k.limits), true, true
}

// Any reports whether a run-time key was ever made.
func (s *Store) Any() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.any
}

// clientKey is a key's limits as the HTTP layer applies them.
func clientKey(name string, l *httpapi.KeyLimits) httpapi.ClientKey {
	ck := httpapi.ClientKey{Client: llm.Client{Name: name, Weight: l.Weight, MaxRunning: l.MaxRunning,
		MaxQueued: l.MaxQueued, RPM: l.RateLimit.RPM, TPM: l.RateLimit.TPM}, Models: l.Models}
	if p, err := llm.ParsePriority(l.MaxPriority); l.MaxPriority != "" && err == nil {
		ck.MaxPriority, ck.LimitPriority = p, true
	}
	return ck
}

// Used notes that key name was presented at now; the ledger writer stores it.
func (s *Store) Used(name string, now time.Time) {
	s.mu.Lock()
	if k := s.keys[name]; k != nil && now.After(k.lastUsed) {
		k.lastUsed = now
	}
	s.mu.Unlock()
	s.ledger.touch(name)
}

// ListKeys lists every key, config and run-time, sorted by name.
func (s *Store) ListKeys(context.Context) ([]httpapi.KeyInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	out := make([]httpapi.KeyInfo, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, s.info(k, now))
	}
	slices.SortFunc(out, func(a, b httpapi.KeyInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// info is k as the admin API shows it; s.mu is held.
func (s *Store) info(k *key, now time.Time) httpapi.KeyInfo {
	k.spend.roll(now, period(k.limits.Budget))
	ki := httpapi.KeyInfo{Name: k.name, Source: "admin", KeyLimits: k.limits, SpendUSD: k.spend.usd,
		PeriodStart: k.spend.start, Revoked: k.revoked}
	if k.config {
		ki.Source = "config"
	}
	if ki.Models == nil {
		ki.Models = []string{}
	}
	if !k.created.IsZero() {
		ki.CreatedAt = ptr(k.created)
	}
	if !k.lastUsed.IsZero() {
		ki.LastUsedAt = ptr(k.lastUsed)
	}
	return ki
}

func ptr[T any](v T) *T { return &v }

// CreateKey makes a run-time key and returns it with its secret, shown this once.
func (s *Store) CreateKey(ctx context.Context, name string, l httpapi.KeyLimits) (httpapi.KeyInfo, string, error) {
	if !keyName.MatchString(name) {
		return httpapi.KeyInfo{}, "", &httpapi.KeyError{Field: "name", Msg: "want 1 to 64 letters, digits, '.', '_' and '-'"}
	}
	secret, digest := newSecret()
	now := s.opts.Now()
	s.admin.Lock() // one admin change at a time; calls only wait for s.mu, never for the database
	defer s.admin.Unlock()
	s.mu.Lock()
	k := s.keys[name]
	s.mu.Unlock()
	if k != nil {
		return httpapi.KeyInfo{}, "", taken(k)
	}
	models, _ := json.Marshal(l.Models)
	var bu, bp any
	if l.Budget != nil {
		bu, bp = l.Budget.USD, l.Budget.Period
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO client_keys (name, digest, weight, max_running, max_queued,
		rpm, tpm, models, max_priority, budget_usd, budget_period, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`),
		name, hex.EncodeToString(digest[:]), l.Weight, l.MaxRunning, l.MaxQueued, l.RateLimit.RPM, l.RateLimit.TPM,
		string(models), l.MaxPriority, bu, bp, ms(now))
	if err != nil {
		return httpapi.KeyInfo{}, "", fmt.Errorf("store: create key %s: %w", name, err)
	}
	k = &key{name: name, limits: l, digest: digest, created: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[name], s.byHash[digest], s.any = k, k, true
	return s.info(k, now), secret, nil
}

// taken is the refusal of a name already in use.
func taken(k *key) error {
	if k.config {
		return &httpapi.KeyError{Field: "name", Msg: fmt.Sprintf("%q is a config key (auth.api_keys); change it in the config file", k.name)}
	}
	return &httpapi.KeyError{Field: "name", Msg: fmt.Sprintf("%q is already a key", k.name)}
}

// runtimeKey returns the run-time key name, or why it cannot be changed; s.admin is held.
func (s *Store) runtimeKey(name string) (*key, error) {
	s.mu.Lock()
	k := s.keys[name]
	s.mu.Unlock()
	switch {
	case k == nil:
		return nil, httpapi.ErrNoSuchKey
	case k.config:
		return nil, &httpapi.KeyError{Field: "name", Msg: fmt.Sprintf("%q is a config key (auth.api_keys); change it in the config file", name)}
	}
	return k, nil
}

// PatchKey changes a run-time key's limits; calls entering from then on get them.
func (s *Store) PatchKey(ctx context.Context, name string, p httpapi.KeyPatch) (httpapi.KeyInfo, error) {
	s.admin.Lock()
	defer s.admin.Unlock()
	k, err := s.runtimeKey(name)
	if err != nil {
		return httpapi.KeyInfo{}, err
	}
	l := applyPatch(k.limits, p)
	models, _ := json.Marshal(l.Models)
	var bu, bp any
	if l.Budget != nil {
		bu, bp = l.Budget.USD, l.Budget.Period
	}
	_, err = s.db.ExecContext(ctx, s.q(`UPDATE client_keys SET weight=$1, max_running=$2, max_queued=$3, rpm=$4, tpm=$5,
		models=$6, max_priority=$7, budget_usd=$8, budget_period=$9 WHERE name=$10`),
		l.Weight, l.MaxRunning, l.MaxQueued, l.RateLimit.RPM, l.RateLimit.TPM, string(models), l.MaxPriority, bu, bp, name)
	if err != nil {
		return httpapi.KeyInfo{}, fmt.Errorf("store: patch key %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k.limits = l
	return s.info(k, s.opts.Now()), nil
}

// applyPatch is l with p's fields set or cleared.
func applyPatch(l httpapi.KeyLimits, p httpapi.KeyPatch) httpapi.KeyLimits {
	n := p.Limits
	pick := func(f string) bool { return p.Set[f] }
	if pick("weight") {
		l.Weight = n.Weight
	} else if p.Clear["weight"] {
		l.Weight = 1
	}
	for f, dst := range map[string]*int{"max_running": &l.MaxRunning, "max_queued": &l.MaxQueued,
		"rate_limit.rpm": &l.RateLimit.RPM, "rate_limit.tpm": &l.RateLimit.TPM} {
		src := map[string]int{"max_running": n.MaxRunning, "max_queued": n.MaxQueued,
			"rate_limit.rpm": n.RateLimit.RPM, "rate_limit.tpm": n.RateLimit.TPM}[f]
		switch {
		case pick(f):
			*dst = src
		case p.Clear[f]:
			*dst = 0
		}
	}
	switch {
	case pick("models"):
		l.Models = n.Models
	case p.Clear["models"]:
		l.Models = nil
	}
	switch {
	case pick("max_priority"):
		l.MaxPriority = n.MaxPriority
	case p.Clear["max_priority"]:
		l.MaxPriority = ""
	}
	switch {
	case pick("budget"):
		l.Budget = n.Budget
	case p.Clear["budget"]:
		l.Budget = nil
	}
	return l
}

// RotateKey gives a run-time key a new secret; the old one keeps working for grace.
func (s *Store) RotateKey(ctx context.Context, name string, grace time.Duration) (httpapi.KeyInfo, string, error) {
	secret, digest := newSecret()
	now := s.opts.Now()
	s.admin.Lock()
	defer s.admin.Unlock()
	k, err := s.runtimeKey(name)
	if err != nil {
		return httpapi.KeyInfo{}, "", err
	}
	if k.revoked {
		return httpapi.KeyInfo{}, "", &httpapi.KeyError{Field: "name", Msg: fmt.Sprintf("%q is revoked", name)}
	}
	until := now.Add(grace)
	_, err = s.db.ExecContext(ctx, s.q(`UPDATE client_keys SET digest=$1, old_digest=$2, old_until=$3 WHERE name=$4`),
		hex.EncodeToString(digest[:]), hex.EncodeToString(k.digest[:]), ms(until), name)
	if err != nil {
		return httpapi.KeyInfo{}, "", fmt.Errorf("store: rotate key %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unindex(k)
	k.oldDigest, k.oldUntil, k.digest = k.digest, until, digest
	s.index(k)
	return s.info(k, now), secret, nil
}

// RevokeKey revokes a run-time key: it is refused from now on.
func (s *Store) RevokeKey(ctx context.Context, name string) (httpapi.KeyInfo, error) {
	now := s.opts.Now()
	s.admin.Lock()
	defer s.admin.Unlock()
	k, err := s.runtimeKey(name)
	if err != nil {
		return httpapi.KeyInfo{}, err
	}
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE client_keys SET revoked_at=$1 WHERE name=$2`), ms(now), name); err != nil {
		return httpapi.KeyInfo{}, fmt.Errorf("store: revoke key %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k.revoked = true
	return s.info(k, now), nil
}

// newSecret returns a fresh secret, "tg-" and 32 random bytes in base64url, and its digest.
func newSecret() (string, [32]byte) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if the OS cannot give randomness)
	secret := "tg-" + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, sha256.Sum256([]byte(secret))
}

// load reads the run-time keys, when each key was seen, and the current periods' spend.
func (s *Store) load(ctx context.Context) error {
	now := s.opts.Now()
	s.keys, s.byHash = map[string]*key{}, map[[32]byte]*key{}
	for _, c := range s.opts.Config {
		s.keys[c.Name] = &key{name: c.Name, config: true, limits: c.KeyLimits}
	}
	if err := s.loadRuntimeKeys(ctx); err != nil {
		return err
	}
	if err := s.loadActivity(ctx, now); err != nil {
		return err
	}
	return s.loadSpend(ctx, now)
}

// loadRuntimeKeys indexes the run-time keys the database holds; s.keys holds the config
// keys, whose names win.
func (s *Store) loadRuntimeKeys(ctx context.Context) error {
	rows, err := s.readRuntimeKeys(ctx)
	if err != nil {
		return err
	}
	for _, k := range rows {
		if c := s.keys[k.name]; c != nil && c.config {
			s.log.Warn().Str("client", k.name).Msg("a run-time client key has the name of a config key; the config key wins")
		}
	}
	s.take(rows)
	return nil
}

// index makes k's secrets (its current one, and its previous one while a rotation's grace
// lasts) resolve to it; s.mu is held or the store is not shared yet.
func (s *Store) index(k *key) {
	s.byHash[k.digest] = k
	if !k.oldUntil.IsZero() {
		s.byHash[k.oldDigest] = k
	}
}

// unindex undoes index.
func (s *Store) unindex(k *key) {
	delete(s.byHash, k.digest)
	if !k.oldUntil.IsZero() {
		delete(s.byHash, k.oldDigest)
	}
}

// readRuntimeKeys reads every run-time key row, revoked ones included.
func (s *Store) readRuntimeKeys(ctx context.Context) ([]*key, error) {
	return s.readKeys(ctx, "")
}

// readKeys reads the run-time key rows that where (a WHERE clause, with args; "": all)
// selects, revoked ones included.
func (s *Store) readKeys(ctx context.Context, where string, args ...any) ([]*key, error) {
	query := `SELECT name, digest, old_digest, old_until, weight, max_running, max_queued,
		rpm, tpm, models, max_priority, budget_usd, budget_period, created_at, revoked_at FROM client_keys`
	if where != "" {
		query += " WHERE " + where
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*key
	for rows.Next() {
		k := &key{}
		var digest, models string
		var oldDigest, period sql.NullString
		var oldUntil, revoked sql.NullInt64
		var usd sql.NullFloat64
		var created int64
		l := &k.limits
		if err := rows.Scan(&k.name, &digest, &oldDigest, &oldUntil, &l.Weight, &l.MaxRunning, &l.MaxQueued,
			&l.RateLimit.RPM, &l.RateLimit.TPM, &models, &l.MaxPriority, &usd, &period, &created, &revoked); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(models), &l.Models); err != nil {
			return nil, fmt.Errorf("key %s: models: %w", k.name, err)
		}
		if usd.Valid {
			l.Budget = &httpapi.KeyBudget{USD: usd.Float64, Period: period.String}
		}
		k.digest = unhex(digest)
		if oldDigest.Valid && oldUntil.Valid {
			k.oldDigest, k.oldUntil = unhex(oldDigest.String), fromMs(oldUntil.Int64)
		}
		k.created, k.revoked = fromMs(created), revoked.Valid
		out = append(out, k)
	}
	return out, rows.Err()
}

func unhex(s string) [32]byte {
	var d [32]byte
	_, _ = hex.Decode(d[:], []byte(s))
	return d
}

// loadActivity reads first-seen and last-used times, marking config keys seen for the
// first time now.
func (s *Store) loadActivity(ctx context.Context, now time.Time) error {
	rows, err := s.db.QueryContext(ctx, `SELECT name, first_seen, last_used_at FROM key_activity`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var first int64
		var last sql.NullInt64
		if err := rows.Scan(&name, &first, &last); err != nil {
			return err
		}
		if k := s.keys[name]; k != nil {
			if k.config {
				k.created = fromMs(first)
			}
			if last.Valid {
				k.lastUsed = fromMs(last.Int64)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range s.keys {
		if k.config && k.created.IsZero() {
			k.created = now
			if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO key_activity (name, first_seen) VALUES ($1, $2)
				ON CONFLICT (name) DO NOTHING`), k.name, ms(now)); err != nil {
				return err
			}
		}
	}
	return nil
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return sub
}
