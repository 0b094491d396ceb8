package sandbox_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

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

// TestTimeoutSeconds: 0 is none; a timeout too small to be one, too large, negative or NaN is
// refused rather than rounded to none or overflowed.
func TestTimeoutSeconds(t *testing.T) {
	t.Parallel()
	for s, want := range map[float64]time.Duration{0: 0, 0.001: time.Millisecond, 1.5: 1500 * time.Millisecond, 86400: 24 * time.Hour} {
		if got, err := sandbox.TimeoutSeconds(s); err != nil || got != want {
			t.Errorf("TimeoutSeconds(%g) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []float64{1e-10, -1, 86401, 1e300, math.NaN(), math.Inf(1)} {
		if got, err := sandbox.TimeoutSeconds(s); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("TimeoutSeconds(%g) = %v, %v; want ErrInvalid", s, got, err)
		}
	}
}
