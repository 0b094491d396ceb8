package turns

import (
	"context"
	"time"
)

// retentionEvery is how often RunRetention prunes: events outlive the retention by at most this.
const retentionEvery = time.Hour

// PruneEvents forgets the events older than the retention and says how many; with no
// retention it does nothing.
func (s *Service) PruneEvents(ctx context.Context) (int, error) {
	if s.cfg.EventRetention <= 0 {
		return 0, nil
	}
	return s.cfg.Store.DeleteEventsBefore(ctx, s.cfg.Clock.Now().Add(-s.cfg.EventRetention))
}

// RunRetention prunes events at once and then every hour until ctx ends. Its caller owns it.
func (s *Service) RunRetention(ctx context.Context) {
	if s.cfg.EventRetention <= 0 {
		return
	}
	t := s.cfg.Clock.NewTicker(retentionEvery, "turns", "retention")
	defer t.Stop()
	for {
		if n, err := s.PruneEvents(ctx); err != nil {
			s.log.Warn("prune old events", "err", err)
		} else if n > 0 {
			s.log.Info("pruned old events", "events", n, "retention", s.cfg.EventRetention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
