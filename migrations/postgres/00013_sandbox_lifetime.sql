-- +goose Up
-- What a sandbox made through the E2B-compatible API (/e2b) carries beyond hangar's own: its
-- metadata (the caller's key/value labels, which Sandbox.list filters on), when its time is up
-- (end_at, Unix milliseconds; 0: never) and what happens then (on_timeout: kill or pause). The
-- deadline is stored so a restarted control plane, or another replica, still enforces it.
ALTER TABLE sandboxes ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sandboxes ADD COLUMN end_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN on_timeout TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_end_at ON sandboxes (end_at) WHERE end_at > 0;

-- +goose Down
DROP INDEX sandboxes_end_at;
ALTER TABLE sandboxes DROP COLUMN on_timeout;
ALTER TABLE sandboxes DROP COLUMN end_at;
ALTER TABLE sandboxes DROP COLUMN metadata;
