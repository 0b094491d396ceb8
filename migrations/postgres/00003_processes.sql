-- +goose Up
-- A background process hangar started, kept so that a restarted control plane follows again
-- exactly the processes it started (the tag, the pid and the start bind a record to one process
-- instance: a process started later with a copied tag is not it) and never one that ended.
CREATE TABLE processes (
    id         TEXT PRIMARY KEY,
    token_id   TEXT NOT NULL,               -- the token that started it: it owns the process
    user_name  TEXT NOT NULL,
    sandbox    TEXT NOT NULL,
    command    TEXT NOT NULL,
    cwd        TEXT NOT NULL DEFAULT '',
    tag        TEXT NOT NULL,               -- the daemon's tag of the process
    pid        BIGINT NOT NULL DEFAULT 0,   -- the daemon's pid of the process (0: no daemon)
    pty        BOOLEAN NOT NULL,
    daemon     BOOLEAN NOT NULL,
    state      TEXT NOT NULL,               -- running, exited
    exit_code  BIGINT,                      -- NULL while running
    status     TEXT NOT NULL DEFAULT '',
    started_at BIGINT NOT NULL,
    ended_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX processes_state ON processes (state);

-- +goose Down
DROP TABLE processes;
