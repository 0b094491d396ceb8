package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
)

// ErrNoSuchItem: the inbox has no item of that id (it was dismissed already, left the window,
// or never was). It comes wrapped with the item and why, which is what a client is told.
var ErrNoSuchItem error = &problem.Sentinel{Text: "no such item in the inbox", Code: problem.CodeNotFound}

// Dismiss takes an item out of p's own inbox for good: it is kept in the store, so every
// replica and every later read leaves it out, and the followers of the fleet get an inbox event
// at its next Poll.
func (s *Service) Dismiss(ctx context.Context, p auth.Principal, item string) error {
	user, err := whose(p, "")
	if err != nil {
		return err
	}
	f, err := s.build(ctx, user)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(f.Inbox, func(it InboxItem) bool { return it.ID == item }) {
		return fmt.Errorf("%w: %q is not in your inbox (dismissed already, older than %s, or mistyped)", ErrNoSuchItem, item, s.cfg.InboxWindow)
	}
	now := s.cfg.Clock.Now()
	if err := s.cfg.Store.DismissInbox(ctx, user, item, now); err != nil {
		return err
	}
	// An item leaves the inbox by age within InboxWindow; a dismissal older than that hides
	// nothing any more.
	if _, err := s.cfg.Store.DeleteDismissals(ctx, now.Add(-s.cfg.InboxWindow)); err != nil {
		s.log.Warn("fleet: forgetting old dismissals", "err", err)
	}
	return nil
}

// undismissed leaves out of items those user dismissed.
func (s *Service) undismissed(ctx context.Context, user string, items []InboxItem, now time.Time) ([]InboxItem, error) {
	if len(items) == 0 {
		return items, nil
	}
	gone, err := s.cfg.Store.DismissedInbox(ctx, user, now.Add(-s.cfg.InboxWindow))
	if err != nil {
		return nil, err
	}
	if len(gone) == 0 {
		return items, nil
	}
	return slices.DeleteFunc(items, func(it InboxItem) bool {
		_, found := slices.BinarySearch(gone, it.ID)
		return found
	}), nil
}
