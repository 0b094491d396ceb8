-- +goose Up
-- Times are Unix milliseconds (UTC) in both stores, so one query layer serves both.
CREATE TABLE users (
    name       TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    user_name   TEXT NOT NULL REFERENCES users (name),
    hash        TEXT NOT NULL UNIQUE, -- hex SHA-256 of the secret; the secret is never stored
    hint        TEXT NOT NULL,        -- the prefix and first characters, to recognise it in a list
    description TEXT NOT NULL DEFAULT '',
    scopes      TEXT NOT NULL,        -- comma-separated
    sandbox     TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX tokens_user_name ON tokens (user_name);

-- +goose Down
DROP TABLE tokens;
DROP TABLE users;
