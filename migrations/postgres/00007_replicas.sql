-- +goose Up
-- Several `hangar serve` replicas on one database (docs/replicas.md). A replica is listed with
-- the URL its peers reach it at, and says it is alive by moving seen_at. A lease makes one
-- replica the owner of a sandbox's process followers and turn watchers until expires_at; its
-- owner renews it, and any replica may take it once it has expired. Times are the database's
-- (now()), so replicas' clocks need not agree.
CREATE TABLE replicas (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,              -- HANGAR_ADVERTISE_URL: where peers forward requests
    started_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL
);
CREATE TABLE leases (
    sandbox    TEXT PRIMARY KEY,
    replica    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    epoch      BIGINT NOT NULL DEFAULT 1   -- moves on each change of owner
);
CREATE INDEX leases_replica ON leases (replica);
CREATE INDEX leases_expires ON leases (expires_at);
-- Open streams per token and replica, so HANGAR_STREAM_MAX_PER_TOKEN holds across replicas.
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
