-- +goose Up
-- OAuth for MCP clients (internal/oauth). Access tokens are ordinary tokens; audience is the
-- resource (RFC 8707) an OAuth access token was issued for and grant_id the grant that issued
-- it, both '' for every other token.
ALTER TABLE tokens ADD COLUMN audience TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_grant_id ON tokens (grant_id);

-- Clients registered dynamically (RFC 7591). Clients known by a metadata document URL are
-- fetched when they ask and not kept.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL, -- newline-separated, compared exactly
    created_at    INTEGER NOT NULL
);

-- A grant is what a person consented to: a client may act as the user with these scopes,
-- bound to sandbox ('' for none), until it is revoked. consent_token is the token the person
-- signed in with: a grant lives no longer than it.
CREATE TABLE oauth_grants (
    id            TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL,
    client_name   TEXT NOT NULL,
    user_name     TEXT NOT NULL REFERENCES users (name),
    scopes        TEXT NOT NULL, -- comma-separated
    sandbox       TEXT NOT NULL DEFAULT '',
    resource      TEXT NOT NULL,
    consent_token TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER
);
CREATE INDEX oauth_grants_user_name ON oauth_grants (user_name);

-- Authorization codes, by the hash of the code. grant_id is set when the code is exchanged,
-- so that a second use can revoke what the first one issued.
CREATE TABLE oauth_codes (
    hash           TEXT PRIMARY KEY,
    grant_id       TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER
);

-- Refresh tokens, by hash. Each is used once: using it makes its successor; using it again
-- revokes its grant.
CREATE TABLE oauth_refresh_tokens (
    hash       TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL REFERENCES oauth_grants (id),
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- +goose Down
DROP TABLE oauth_refresh_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_clients;
DROP INDEX tokens_grant_id;
ALTER TABLE tokens DROP COLUMN grant_id;
ALTER TABLE tokens DROP COLUMN audience;
