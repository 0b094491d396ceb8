package store

import (
	"context"
	"time"
)

// FleetStore keeps what the Fleet needs besides sessions and sandboxes: the browser tickets (in
// the database so a ticket asked of one replica opens the stream on any, and is used once across
// all) and the inbox items people dismissed.
type FleetStore interface {
	// CreateTicket stores a ticket unless its token already holds max unexpired ones at now:
	// then it stores nothing and answers ErrLimit. ErrConflict when its hash is taken.
	CreateTicket(ctx context.Context, t Ticket, max int, now time.Time) error
	// RedeemTicket deletes the ticket with that hash and returns it, if it is unexpired at now;
	// ErrNotFound otherwise. Of two concurrent redeems of one ticket, one wins.
	RedeemTicket(ctx context.Context, hash string, now time.Time) (Ticket, error)
	// DeleteExpiredTickets forgets the tickets expired at now, and says how many.
	DeleteExpiredTickets(ctx context.Context, now time.Time) (int, error)

	// DismissInbox records that user dismissed the inbox item; dismissing it again keeps the
	// first time.
	DismissInbox(ctx context.Context, user, item string, at time.Time) error
	// DismissedInbox lists the items user dismissed at or after since.
	DismissedInbox(ctx context.Context, user string, since time.Time) ([]string, error)
	// DeleteDismissals forgets the dismissals made before the given time (their items have left
	// the inbox's window by then), and says how many.
	DeleteDismissals(ctx context.Context, before time.Time) (int, error)
}

// Ticket is a stored fleet ticket: the hash of its secret and who it was made for.
type Ticket struct {
	Hash           string
	TokenID        string    // the token that asked for it
	User           string    // that token's user: the fleet it opens
	TokenExpiresAt time.Time // that token's own expiry; zero: never
	Static         bool      // that token is from the tokens file
	ExpiresAt      time.Time // the ticket's expiry
}
