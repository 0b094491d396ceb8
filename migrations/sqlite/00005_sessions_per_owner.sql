-- +goose Up
-- Session names are unique per owner, not across users (a global name told one user another's
-- session names). SQLite cannot drop a column's UNIQUE: the table is made again.
-- split and split_uid: the session's agent runs as split_uid, its harness as root, with the
-- run log and status file where split_uid cannot write.
CREATE TABLE sessions_new (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,              -- the user it belongs to
    token_id   TEXT NOT NULL,              -- the token that created it
    sandbox    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    env        TEXT NOT NULL DEFAULT '{}', -- JSON object: the agent's env (secrets: never returned)
    job_id     TEXT NOT NULL DEFAULT '',   -- the job it was made for, if any
    last_seq   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    split      INTEGER NOT NULL DEFAULT 0,
    split_uid  INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sessions_new (id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at)
    SELECT id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE UNIQUE INDEX sessions_owner_name ON sessions (owner, name);

-- cancel_requested: a caller cancelled the turn; kept so a cancel outlives a restart (the new
-- control plane sends the signal again and records the end as cancelled).
-- process_start: the harness's start time (/proc/<pid>/stat starttime, clock ticks since boot):
-- with process_pid it names one process, never a later one that got the same pid.
ALTER TABLE turns ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN process_start INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN process_start;
ALTER TABLE turns DROP COLUMN cancel_requested;
CREATE TABLE sessions_old (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    owner      TEXT NOT NULL,
    token_id   TEXT NOT NULL,
    sandbox    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    env        TEXT NOT NULL DEFAULT '{}',
    job_id     TEXT NOT NULL DEFAULT '',
    last_seq   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
INSERT INTO sessions_old SELECT id, name, owner, token_id, sandbox, agent, env, job_id, last_seq, created_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_old RENAME TO sessions;
CREATE INDEX sessions_owner ON sessions (owner);
