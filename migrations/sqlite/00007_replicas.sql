-- +goose Up
-- Several replicas need PostgreSQL (docs/replicas.md): SQLite is one process, which never reads
-- these tables. They exist so both folders keep the same numbers and tables.
CREATE TABLE replicas (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL
);
CREATE TABLE leases (
    sandbox    TEXT PRIMARY KEY,
    replica    TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    epoch      INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE stream_slots (
    replica  TEXT NOT NULL,
    token_id TEXT NOT NULL,
    open     INTEGER NOT NULL,
    PRIMARY KEY (replica, token_id)
);

-- +goose Down
DROP TABLE stream_slots;
DROP TABLE leases;
DROP TABLE replicas;
