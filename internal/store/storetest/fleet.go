package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func testTickets(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	tk := store.Ticket{Hash: "h1", TokenID: "tok1", User: "ada", TokenExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Minute)}
	if err := s.CreateTicket(ctx, tk, 2, now); err != nil {
		t.Fatalf("CreateTicket: %v", err)
	}
	if err := s.CreateTicket(ctx, tk, 2, now); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateTicket of a taken hash = %v, want ErrConflict", err)
	}
	static := store.Ticket{Hash: "h2", TokenID: "tok1", User: "ada", Static: true, ExpiresAt: now.Add(time.Minute)}
	if err := s.CreateTicket(ctx, static, 2, now); err != nil {
		t.Fatalf("CreateTicket, second: %v", err)
	}
	if err := s.CreateTicket(ctx, store.Ticket{Hash: "h3", TokenID: "tok1", User: "ada", ExpiresAt: now.Add(time.Minute)}, 2, now); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("CreateTicket past the limit = %v, want ErrLimit", err)
	}
	// Another token's tickets are its own count.
	if err := s.CreateTicket(ctx, store.Ticket{Hash: "h4", TokenID: "tok2", User: "bob", ExpiresAt: now.Add(time.Minute)}, 2, now); err != nil {
		t.Fatalf("CreateTicket for another token: %v", err)
	}

	got, err := s.RedeemTicket(ctx, "h1", now)
	if err != nil {
		t.Fatalf("RedeemTicket: %v", err)
	}
	if got != tk {
		t.Fatalf("RedeemTicket = %+v, want %+v", got, tk)
	}
	if _, err := s.RedeemTicket(ctx, "h1", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RedeemTicket again = %v, want ErrNotFound", err)
	}
	if got, err := s.RedeemTicket(ctx, "h2", now); err != nil || !got.Static || !got.TokenExpiresAt.IsZero() {
		t.Fatalf("RedeemTicket of a static token's ticket = %+v, %v; want static, no token expiry", got, err)
	}
	// An expired ticket is not redeemed, and is gone once tried.
	if _, err := s.RedeemTicket(ctx, "h4", now.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RedeemTicket of an expired ticket = %v, want ErrNotFound", err)
	}
	// Expired tickets no longer count against the limit, and are swept.
	for _, h := range []string{"h5", "h6"} {
		if err := s.CreateTicket(ctx, store.Ticket{Hash: h, TokenID: "tok3", User: "ada", ExpiresAt: now.Add(time.Second)}, 2, now); err != nil {
			t.Fatalf("CreateTicket %s: %v", h, err)
		}
	}
	later := now.Add(time.Second)
	if err := s.CreateTicket(ctx, store.Ticket{Hash: "h7", TokenID: "tok3", User: "ada", ExpiresAt: later.Add(time.Minute)}, 2, later); err != nil {
		t.Fatalf("CreateTicket once the others expired: %v", err)
	}
	if n, err := s.DeleteExpiredTickets(ctx, later); err != nil || n != 2 {
		t.Fatalf("DeleteExpiredTickets = %d, %v; want 2", n, err)
	}
}

func testTicketRedeemedOnce(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	if err := s.CreateTicket(ctx, store.Ticket{Hash: "h", TokenID: "tok", User: "ada", ExpiresAt: now.Add(time.Minute)}, 8, now); err != nil {
		t.Fatalf("CreateTicket: %v", err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := s.RedeemTicket(ctx, "h", now)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("RedeemTicket: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent redeems of one ticket won, want 1", won, n)
	}
}

func testInboxDismissals(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	for _, d := range []struct {
		user, item string
		at         time.Time
	}{
		{"ada", "turn_failed:t1", now.Add(-48 * time.Hour)},
		{"ada", "job_finished:j1", now},
		{"ada", "job_finished:j1", now.Add(time.Second)}, // again: the first time stays
		{"bob", "turn_failed:t2", now},
	} {
		if err := s.DismissInbox(ctx, d.user, d.item, d.at); err != nil {
			t.Fatalf("DismissInbox(%s, %s): %v", d.user, d.item, err)
		}
	}
	got, err := s.DismissedInbox(ctx, "ada", now.Add(-24*time.Hour))
	if err != nil || !slices.Equal(got, []string{"job_finished:j1"}) {
		t.Fatalf("DismissedInbox(ada, last day) = %q, %v; want [job_finished:j1]", got, err)
	}
	if got, err := s.DismissedInbox(ctx, "ada", now.Add(time.Millisecond)); err != nil || len(got) != 0 {
		t.Fatalf("DismissedInbox(ada, after the dismissal) = %q, %v; want none (the second dismissal kept the first time)", got, err)
	}
	if n, err := s.DeleteDismissals(ctx, now.Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("DeleteDismissals = %d, %v; want 1", n, err)
	}
	if got, err := s.DismissedInbox(ctx, "bob", time.Time{}); err != nil || !slices.Equal(got, []string{"turn_failed:t2"}) {
		t.Fatalf("DismissedInbox(bob) = %q, %v", got, err)
	}
}
