-- The client keys made at run time, when each key was first and last seen, and the ledger of
-- finished calls (SPEC §18). Portable SQL: SQLite and PostgreSQL run the same file. Times are
-- Unix milliseconds (UTC); only SHA-256 digests of secrets are kept, in hex.

-- +goose Up
CREATE TABLE client_keys (
    name          TEXT PRIMARY KEY,
    digest        TEXT NOT NULL UNIQUE,
    old_digest    TEXT,
    old_until     BIGINT,
    weight        INTEGER NOT NULL,
    max_running   INTEGER NOT NULL,
    max_queued    INTEGER NOT NULL,
    rpm           INTEGER NOT NULL,
    tpm           INTEGER NOT NULL,
    models        TEXT NOT NULL,
    max_priority  TEXT NOT NULL,
    budget_usd    DOUBLE PRECISION,
    budget_period TEXT,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT
);

CREATE TABLE key_activity (
    name         TEXT PRIMARY KEY,
    first_seen   BIGINT NOT NULL,
    last_used_at BIGINT
);

CREATE TABLE ledger (
    entry_id     TEXT PRIMARY KEY,
    at           BIGINT NOT NULL,
    day          TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    client       TEXT NOT NULL,
    route        TEXT NOT NULL,
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    served_model TEXT NOT NULL,
    tokens_in    BIGINT NOT NULL,
    cached_in    BIGINT NOT NULL,
    tokens_out   BIGINT NOT NULL,
    reasoning    BIGINT NOT NULL,
    cost_usd     DOUBLE PRECISION NOT NULL,
    status       INTEGER NOT NULL,
    code         TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    queue_ms     BIGINT NOT NULL,
    run_ms       BIGINT NOT NULL
);
CREATE INDEX ledger_at ON ledger (at);
CREATE INDEX ledger_client_at ON ledger (client, at);

-- +goose Down
DROP TABLE ledger;
DROP TABLE key_activity;
DROP TABLE client_keys;
