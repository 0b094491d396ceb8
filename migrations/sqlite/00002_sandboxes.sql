-- +goose Up
-- A sandbox row outlives the sandbox (state destroyed) until its name is taken again, so a
-- late request learns the sandbox was destroyed rather than that it never existed.
CREATE TABLE sandboxes (
    name         TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    provider     TEXT NOT NULL,
    provider_id  TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    image        TEXT NOT NULL DEFAULT '',
    template     TEXT NOT NULL DEFAULT '',
    workdir      TEXT NOT NULL DEFAULT '',
    env          TEXT NOT NULL DEFAULT '{}', -- JSON object
    daemon       INTEGER NOT NULL,           -- 1: the sandbox was asked to have a daemon
    daemon_url   TEXT NOT NULL DEFAULT '',
    daemon_token TEXT NOT NULL DEFAULT '',   -- the daemon's access token, needed to reach it after a restart
    data         TEXT NOT NULL DEFAULT '{}', -- JSON object: the provider's own facts
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX sandboxes_owner ON sandboxes (owner);

-- +goose Down
DROP TABLE sandboxes;
