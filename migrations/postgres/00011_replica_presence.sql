-- +goose Up
-- Whether a replica holds a presence lock (a hangar from issue 28 on): only such a replica's
-- lock that nobody holds says it is dead; an older replica's leases move when they expire.
ALTER TABLE replicas ADD COLUMN present BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE replicas DROP COLUMN present;
