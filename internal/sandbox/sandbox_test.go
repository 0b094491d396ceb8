package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// TestViewIsOwnersOnly: a client sees its own sandbox, with whether it has a daemon but not
// the daemon's address; another user's sandbox is not there for it.
func TestViewIsOwnersOnly(t *testing.T) {
	t.Parallel()
	e := newExecEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sb, err := e.m.View(ctx, ada, "box")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name != "box" || sb.Owner != "ada" || !sb.HasDaemon || sb.State != "running" {
		t.Errorf("View = %+v, want ada's running box with a daemon", sb)
	}
	list, err := e.m.List(ctx, ada, false)
	if err != nil || len(list) != 1 || list[0].Name != "box" {
		t.Errorf("List = %+v, %v; want box", list, err)
	}
	bob := auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
	if _, err := e.m.View(ctx, bob, "box"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's View of ada's box: %v, want ErrNotFound", err)
	}
	if list, err := e.m.List(ctx, bob, false); err != nil || len(list) != 0 {
		t.Errorf("bob's List = %+v, %v; want none", list, err)
	}
}
