-- +goose Up
-- Whether a replica is shutting down (its handover under way): its peers hand it no lease,
-- neither when they balance nor when they leave at the same time.
ALTER TABLE replicas ADD COLUMN leaving BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE replicas DROP COLUMN leaving;
