-- +goose Up
-- The OAuth grant whose token started a process ('' for none): HANGAR_BACKGROUND_MAX_PER_TOKEN
-- counts a grant's processes together, since each refresh makes a new token id.
ALTER TABLE processes ADD COLUMN grant_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE processes DROP COLUMN grant_id;
