-- +goose Up
-- How far a process's output offsets have been given out (docs/processes.md): a control plane
-- that adopts the process after a restart or takeover carries on from here, so offsets never go
-- back. While it runs, a mark hangar reserves ahead of what it sends; once it ended, the end.
ALTER TABLE processes ADD COLUMN output_end INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE processes DROP COLUMN output_end;
