-- +goose Up
-- A session is a named agent conversation in a sandbox. last_seq is the seq of its newest event:
-- events take the next numbers under the row's lock, so they stay gapless and unique.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    owner      TEXT NOT NULL,              -- the user it belongs to
    token_id   TEXT NOT NULL,              -- the token that created it
    sandbox    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    env        TEXT NOT NULL DEFAULT '{}', -- JSON object: the agent's env (secrets: never returned)
    job_id     TEXT NOT NULL DEFAULT '',   -- the job it was made for, if any
    last_seq   BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE INDEX sessions_owner ON sessions (owner);

-- A turn is one run of the agent with a prompt. read_pos is how far into the run log its
-- events are recorded: it moves in the same transaction as the events, so a restarted watcher
-- neither records a line twice nor skips one.
CREATE TABLE turns (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    job_id      TEXT NOT NULL DEFAULT '',
    prompt      TEXT NOT NULL,
    state       TEXT NOT NULL,              -- queued, running, done, failed, cancelled
    dir         TEXT NOT NULL DEFAULT '',   -- its directory in the sandbox (run log, status file)
    process_tag TEXT NOT NULL DEFAULT '',   -- the harness's process, to cancel it
    process_pid BIGINT NOT NULL DEFAULT 0,
    read_pos    BIGINT NOT NULL DEFAULT 0,
    exit_code   BIGINT,                    -- NULL until it ended with one
    signal      TEXT NOT NULL DEFAULT '',
    summary     TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    started_at  BIGINT NOT NULL DEFAULT 0,
    ended_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX turns_session ON turns (session_id, created_at);
-- One turn at a time per session.
CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE state IN ('queued', 'running');

-- A job is an unattended task: a sandbox, a session and one turn, seen only by its token.
CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,
    token_id        TEXT NOT NULL,
    owner           TEXT NOT NULL,
    sandbox         TEXT NOT NULL,
    sandbox_created BOOLEAN NOT NULL,       -- the job made the sandbox
    session_id      TEXT NOT NULL,
    turn_id         TEXT NOT NULL,
    last_seq        BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL
);
CREATE INDEX jobs_token ON jobs (token_id);

CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    job_id     TEXT NOT NULL DEFAULT '',
    job_seq    BIGINT NOT NULL DEFAULT 0,  -- 0 outside a job
    turn_id    TEXT NOT NULL,
    ts         BIGINT NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    invalid    BOOLEAN NOT NULL DEFAULT false, -- the line is not JSON: data is a JSON string of it
    truncated  BOOLEAN NOT NULL DEFAULT false, -- the line was cut
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX events_job ON events (job_id, job_seq);
CREATE INDEX events_ts ON events (ts);

-- +goose Down
DROP TABLE events;
DROP TABLE jobs;
DROP TABLE turns;
DROP TABLE sessions;
