-- +goose Up
-- Fleet tickets: one-time passes that let a browser open its person's fleet stream (an
-- EventSource cannot send a header). Kept here, not in one replica's memory, so a ticket asked
-- of one replica opens the stream on any; only the hash of a ticket is stored.
CREATE TABLE fleet_tickets (
    hash             TEXT PRIMARY KEY,
    token_id         TEXT NOT NULL, -- the token that asked: its person's fleet
    user_name        TEXT NOT NULL,
    token_expires_at BIGINT NOT NULL DEFAULT 0, -- that token's own expiry (0: none)
    static           BOOLEAN NOT NULL, -- that token is the configured admin token
    expires_at       BIGINT NOT NULL -- the ticket's
);
CREATE INDEX fleet_tickets_token ON fleet_tickets (token_id);
CREATE INDEX fleet_tickets_expires ON fleet_tickets (expires_at);

-- The inbox items a person dismissed, by the item's id (stable: "turn_failed:<turn>", ...).
CREATE TABLE inbox_dismissals (
    user_name    TEXT NOT NULL,
    item_id      TEXT NOT NULL,
    dismissed_at BIGINT NOT NULL,
    PRIMARY KEY (user_name, item_id)
);
CREATE INDEX inbox_dismissals_at ON inbox_dismissals (dismissed_at);

-- +goose Down
DROP TABLE inbox_dismissals;
DROP TABLE fleet_tickets;
