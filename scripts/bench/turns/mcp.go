package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// readMCP follows the session's events as an MCP subscriber (go-sdk's client, 2025-11-25):
// subscribed to hangar://sessions/<name>/events, it reads ?since= the last seq at each
// notifications/resources/updated, until the turn's turn.finished. An event's time is when its
// read came back: hangar sends an update at once, then at most one every 250 ms per
// subscription, so at 10 lines a second most lines wait for the next update.
func readMCP(ctx context.Context, srv *benchkit.Server, session string, since int64, started chan<- struct{}, got func(ev event, at time.Time)) error {
	uri := "hangar://sessions/" + session + "/events"
	sub, err := srv.Subscribe(ctx, uri)
	if err != nil {
		return err
	}
	defer sub.Close()
	close(started)
	last := since
	for {
		for {
			var page struct {
				Events []event `json:"events"`
				Next   int64   `json:"next"`
			}
			if err := sub.Read(ctx, fmt.Sprintf("%s?since=%d", uri, last), &page); err != nil {
				return err
			}
			at := time.Now()
			for _, ev := range page.Events {
				got(ev, at)
				if ev.Type == "turn.finished" {
					return nil
				}
			}
			last = page.Next
			if len(page.Events) < 100 { // a read's page: read again when there may be more
				break
			}
		}
		select {
		case <-sub.Updated:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
