package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/providers/llm"
)

// Tenants keeps what SPEC §18 says about client keys beyond who they are: the keys made at
// run time, each key's spend against its budget, and the ledger of finished calls. The
// store (cmd/internal/store) implements it; nil Options.Tenants means none of it (no admin
// key routes, no budgets, no ledger).
type Tenants interface {
	KeyResolver
	// Spend returns the key's spend in its current period, its budget (0: none) and when the
	// period resets, from memory: it never waits for the store.
	Spend(name string, now time.Time) (spent, budget float64, resets time.Time)
	// Record puts one finished call in the ledger and the key's spend, returning its cost in
	// USD. It never blocks: the store writes from a bounded buffer.
	Record(e LedgerEntry) float64
	// Used notes that the key was presented at now (its last_used_at).
	Used(name string, now time.Time)

	ListKeys(ctx context.Context) ([]KeyInfo, error)
	CreateKey(ctx context.Context, name string, l KeyLimits) (KeyInfo, string, error)
	PatchKey(ctx context.Context, name string, p KeyPatch) (KeyInfo, error)
	RotateKey(ctx context.Context, name string, grace time.Duration) (KeyInfo, string, error)
	RevokeKey(ctx context.Context, name string) (KeyInfo, error)
	Usage(ctx context.Context, q UsageQuery) (UsageReport, error)
}

// ClientRevoker is what the gateway may offer to answer a revoked key's waiting calls: 401
// for each queued call of the client, running ones finish; it returns how many it answered.
type ClientRevoker interface {
	RevokeClient(name string) int
}

// KeyLimits are a client key's limits as the admin API and the ledger's key list show them.
type KeyLimits struct {
	Weight      int        `json:"weight"`
	MaxRunning  int        `json:"max_running"`
	MaxQueued   int        `json:"max_queued"`
	RateLimit   KeyRate    `json:"rate_limit"`
	Models      []string   `json:"models"`
	MaxPriority string     `json:"max_priority"`
	Budget      *KeyBudget `json:"budget"`
}

// KeyRate is a key's own requests and tokens per minute; 0: none.
type KeyRate struct {
	RPM int `json:"rpm"`
	TPM int `json:"tpm"`
}

// KeyBudget is a key's spend cap per calendar period (day, week, month; UTC).
type KeyBudget struct {
	USD    float64 `json:"usd"`
	Period string  `json:"period"`
}

// KeyPatch is a PATCH body: each field present replaces the key's; Clear lists the fields
// sent as null, which go back to "none".
type KeyPatch struct {
	Limits KeyLimits
	Set    map[string]bool // the fields present and not null
	Clear  map[string]bool // the fields sent as null
}

// KeyInfo is one key as GET /admin/keys shows it: never a secret or a digest.
type KeyInfo struct {
	Name   string `json:"name"`
	Source string `json:"source"` // "config" or "admin"
	KeyLimits
	CreatedAt   *time.Time `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	SpendUSD    float64    `json:"spend_usd"`
	PeriodStart time.Time  `json:"period_start"`
	Revoked     bool       `json:"revoked"`
}

// LedgerEntry is one finished call (a batch member each), SPEC §18.
type LedgerEntry struct {
	At                 time.Time
	RequestID          string
	Key                string // the key's name; "" for the anonymous client
	Route              string
	Provider           string
	Model, ServedModel string // asked and served
	Usage              llm.Usage
	Status             int
	Code               string
	Attempts           int
	QueueMs, RunMs     int64
	CostUSD            float64 // set by Record
}

// UsageQuery selects and groups ledger rows for GET /admin/usage.
type UsageQuery struct {
	From, To time.Time
	GroupBy  []string // of key, model, provider, day
}

// UsageRow is one group's counters; only the grouped columns are set.
type UsageRow struct {
	Key      *string `json:"key,omitempty"`
	Model    *string `json:"model,omitempty"`
	Provider *string `json:"provider,omitempty"`
	Day      *string `json:"day,omitempty"`
	UsageCounters
}

// UsageCounters are what a usage row and the total count.
type UsageCounters struct {
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	TokensIn  int64   `json:"tokens_in"`
	CachedIn  int64   `json:"cached_in"`
	TokensOut int64   `json:"tokens_out"`
	Reasoning int64   `json:"reasoning"`
	CostUSD   float64 `json:"cost_usd"`
}

// UsageReport is GET /admin/usage's answer.
type UsageReport struct {
	From    time.Time     `json:"from"`
	To      time.Time     `json:"to"`
	GroupBy []string      `json:"group_by"`
	Rows    []UsageRow    `json:"rows"`
	Total   UsageCounters `json:"total"`
}

// KeyError is a refused admin request: 400 invalid_request naming Field.
type KeyError struct {
	Field, Msg string
}

func (e *KeyError) Error() string { return e.Field + ": " + e.Msg }

// ErrNoSuchKey: the named run-time key does not exist (404).
var ErrNoSuchKey = errors.New("no such client key")
