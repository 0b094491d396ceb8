-- +goose Up
-- launching: the replica that runs a queued turn recorded that it is about to launch the turn's
-- harness (store.TurnStore.BeginLaunch), before it did. A control plane that finds a turn still
-- queued runs it when this is false (nobody launched anything for it), and fails it when it is
-- true (a harness may run that no record names). Queued turns an older hangar left are taken as
-- launching: it recorded nothing before its launches.
ALTER TABLE turns ADD COLUMN launching INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET launching = 1 WHERE state = 'queued';

-- +goose Down
ALTER TABLE turns DROP COLUMN launching;
