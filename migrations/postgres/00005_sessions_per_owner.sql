-- +goose Up
-- Session names are unique per owner, not across users (a global name told one user another's
-- session names).
ALTER TABLE sessions DROP CONSTRAINT sessions_name_key;
DROP INDEX sessions_owner;
CREATE UNIQUE INDEX sessions_owner_name ON sessions (owner, name);
-- split and split_uid: the session's agent runs as split_uid, its harness as root, with the
-- run log and status file where split_uid cannot write.
ALTER TABLE sessions ADD COLUMN split BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN split_uid BIGINT NOT NULL DEFAULT 0;

-- cancel_requested: a caller cancelled the turn; kept so a cancel outlives a restart (the new
-- control plane sends the signal again and records the end as cancelled).
-- process_start: the harness's start time (/proc/<pid>/stat starttime, clock ticks since boot):
-- with process_pid it names one process, never a later one that got the same pid.
ALTER TABLE turns ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE turns ADD COLUMN process_start BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN process_start;
ALTER TABLE turns DROP COLUMN cancel_requested;
ALTER TABLE sessions DROP COLUMN split_uid;
ALTER TABLE sessions DROP COLUMN split;
DROP INDEX sessions_owner_name;
CREATE INDEX sessions_owner ON sessions (owner);
ALTER TABLE sessions ADD CONSTRAINT sessions_name_key UNIQUE (name);
