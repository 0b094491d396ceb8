package e2b

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/watch"
)

// TestWatchThroughE2B: a directory watch of an e2b sandbox takes the same path as any daemon's
// (envd's WatchDir is wire-compatible): the fake's real daemon, reached the way E2B's envd is,
// reports a directory made by a command run in the sandbox.
func TestWatchThroughE2B(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	st, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := newFake(t)
	sbs := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"e2b": newTestProvider(t, f, nil)}, Default: "e2b"})
	defer sbs.Close()
	ada := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	dir := t.TempDir() // the fake's daemon runs on this machine
	if _, err := sbs.Create(ctx, ada, sandbox.CreateRequest{Name: "w1", Workdir: dir}); err != nil {
		t.Fatal(err)
	}
	defer sbs.Destroy(context.WithoutCancel(ctx), ada, "w1")
	ws := watch.New(watch.Config{Sandboxes: sbs})
	defer ws.Close()
	w, err := ws.Open(ctx, ada, "w1", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if res, err := sbs.Exec(ctx, ada, "w1", sandbox.ExecRequest{Command: "mkdir " + dir + "/made"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir in the sandbox: %+v, %v", res, err)
	}
	for {
		changed := w.Changed()
		if evs, _, _ := w.Read(0); len(evs) > 0 {
			if evs[0].Seq != 1 || evs[0].Name != "made" || evs[0].Type != "create" {
				t.Errorf("first event %+v, want seq 1, create made", evs[0])
			}
			return
		}
		if err := w.Err(); err != nil {
			t.Fatalf("the watch ended before its first event: %v", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no event from the e2b sandbox's watch")
		}
	}
}
