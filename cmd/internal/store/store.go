// Package store keeps what SPEC §18 says must outlive a process: the client keys made at run
// time, when each key was last used, and the spend ledger, in SQLite (modernc.org/sqlite, no
// cgo) or PostgreSQL (pgx). Schema migrations are versioned SQL files applied at Open with
// goose. It implements httpapi.Tenants: budgets and key lookups are answered from memory,
// loaded at Open, and ledger writes go through a bounded buffer, so a slow or failing
// database never delays a call.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/rs/zerolog"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/tollgate/tollgate/httpapi"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure Open.
type Options struct {
	// SQLite is a database file path; Postgres a DSN. Exactly one is set.
	SQLite, Postgres string
	// Config are the config's client keys: their names are taken, their budgets counted.
	Config []ConfigKey
	// Prices gives a model id's price; nil: every call costs 0.
	Prices func(model string) Price
	Logger zerolog.Logger
	// Now is the clock; nil → time.Now.
	Now func() time.Time
	// Buffer caps ledger entries waiting to be written; 0 → 10000.
	Buffer int
	// OnDrop, when set, is called with how many ledger entries overflow dropped.
	OnDrop func(n int)
}

// ConfigKey is what the store needs of a config key.
type ConfigKey struct {
	Name string
	httpapi.KeyLimits
}

// Price is a model's price in USD per million tokens.
type Price struct {
	Input, CachedInput, Output float64
}

// Store is an open store. Its methods are safe for concurrent use.
type Store struct {
	db       *sql.DB
	postgres bool
	opts     Options
	log      zerolog.Logger

	// admin serialises the admin API's changes, which write the database before they take
	// mu; mu guards the keys in memory, which calls read.
	admin  sync.Mutex
	mu     sync.Mutex
	keys   map[string]*key // by name: config and run-time keys
	byHash map[[32]byte]*key
	any    bool // a run-time key exists (revoked or not)

	ledger *ledger
	// missed looks up digests this replica does not know, on a shared database (nil: not
	// shared).
	missed *missedLookups
}

// DefaultPath is the SQLite file of the embedded default: tollgate.db under the user's state
// directory ($XDG_STATE_HOME, else ~/.local/state).
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "tollgate", "tollgate.db"), nil
}

// Open connects, applies pending migrations, loads keys and this period's spend, and starts
// the ledger writer. An unreachable database is an error: the gateway does not start.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Buffer <= 0 {
		o.Buffer = 10000
	}
	db, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, postgres: o.Postgres != "", opts: o, log: o.Logger}
	if s.postgres {
		s.missed = newMissedLookups()
	}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.load(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: load keys and spend: %w", err)
	}
	s.ledger = startLedger(s, o.Buffer)
	return s, nil
}

// connect opens and pings the database.
func connect(ctx context.Context, o Options) (*sql.DB, error) {
	var db *sql.DB
	var err error
	what := "postgres"
	if o.Postgres != "" {
		db, err = sql.Open("pgx", o.Postgres)
	} else {
		what = "sqlite " + o.SQLite
		if err = os.MkdirAll(filepath.Dir(o.SQLite), 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		// WAL lets readers (usage) run beside the ledger writer; busy_timeout waits for
		// another process's write instead of failing at once.
		db, err = sql.Open("sqlite", "file:"+o.SQLite+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err == nil {
			db.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", what, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: cannot reach %s: %w", what, err)
	}
	return db, nil
}

// migrate applies the embedded migrations not applied yet. On PostgreSQL an advisory lock
// keeps replicas starting together from applying the same one twice.
func (s *Store) migrate(ctx context.Context) error {
	dialect := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if s.postgres {
		dialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return fmt.Errorf("store: migrations: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	if !s.postgres {
		// Gateways opening one file together (tests, a restart overlapping the old process)
		// take turns: SQLite's own locking does not stop two from both seeing version 0.
		unlock, err := lockFile(s.opts.SQLite + ".migrate.lock")
		if err != nil {
			return fmt.Errorf("store: migrations: %w", err)
		}
		defer unlock()
	}
	p, err := goose.NewProvider(dialect, s.db, mustSub(migrations, "migrations"), opts...)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: apply migrations: %w", err)
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting while another holds it; the func it
// returns releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil // closing the file releases the lock
}

// Close writes what the ledger buffer holds (until ctx ends) and closes the database.
func (s *Store) Close(ctx context.Context) error {
	err := s.ledger.close(ctx)
	return errors.Join(err, s.db.Close())
}

// Flush waits until every ledger entry recorded so far is in the database, or ctx ends.
func (s *Store) Flush(ctx context.Context) error { return s.ledger.flush(ctx) }

// q adapts a query written with $1, $2, … to the engine: SQLite takes ?1, ?2, ….
func (s *Store) q(query string) string {
	if s.postgres {
		return query
	}
	return strings.ReplaceAll(query, "$", "?")
}

// ms is t in Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMs is a Unix-millisecond time in UTC.
func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }
