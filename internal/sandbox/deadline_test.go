package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
)

// owners is a replicas' lease table in one map: a sandbox is mine unless listed as not.
type owners map[string]bool

func (o owners) Owner(_ context.Context, name string) (string, bool, error) {
	if mine, ok := o[name]; ok && !mine {
		return "http://other", false, nil
	}
	return "", true, nil
}

// TestDeadlines: a sandbox whose time is up is destroyed, or paused when it asked for that,
// by the replica that owns it only; one whose time was moved on lives on; the deadline is in
// the store, so a second Manager over it (a restarted hangar) enforces it too.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := quartz.NewMock(t)
	st, f := newStore(t), newFake("local")
	p := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	first := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": f}, Clock: clock})
	t.Cleanup(first.Close)
	for _, req := range []sandbox.CreateRequest{
		{Name: "killed", Timeout: time.Minute, Metadata: map[string]string{"team": "blue"}},
		{Name: "paused", Timeout: time.Minute, OnTimeout: store.OnTimeoutPause},
		{Name: "moved", Timeout: time.Minute},
		{Name: "elsewhere", Timeout: time.Minute},
		{Name: "forever"},
	} {
		if _, err := first.Create(ctx, p, req); err != nil {
			t.Fatalf("Create(%s): %v", req.Name, err)
		}
	}
	if sb, _ := first.View(ctx, p, "killed"); sb.Metadata["team"] != "blue" || !sb.EndAt.Equal(clock.Now().Add(time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("killed = metadata %v end %v, want team=blue and a minute from now", sb.Metadata, sb.EndAt)
	}
	if _, err := first.SetEnd(ctx, p, "moved", clock.Now().Add(time.Hour)); err != nil {
		t.Fatalf("SetEnd(moved): %v", err)
	}
	if got, err := first.ExpireDue(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ExpireDue before the time is up = %v, %v; want nothing done", got, err)
	}

	// A restarted hangar: a new Manager over the same store, on another replica's leases.
	restarted := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": f}, Clock: clock,
		Owners: owners{"elsewhere": false}})
	t.Cleanup(restarted.Close)
	clock.Advance(time.Minute)
	got, err := restarted.ExpireDue(ctx)
	if err != nil {
		t.Fatalf("ExpireDue: %v", err)
	}
	done := map[string]string{}
	for _, e := range got {
		if e.Err != nil {
			t.Errorf("ExpireDue(%s): %v", e.Name, e.Err)
		}
		done[e.Name] = e.Action
	}
	if len(done) != 2 || done["killed"] != store.OnTimeoutKill || done["paused"] != store.OnTimeoutPause {
		t.Errorf("ExpireDue did %v, want killed destroyed and paused paused (moved has an hour, elsewhere is another replica's, forever has no end)", done)
	}
	states := map[string]string{"killed": "destroyed", "paused": "paused", "moved": "running", "elsewhere": "running", "forever": "running"}
	for name, want := range states {
		if sb, err := restarted.View(ctx, p, name); err != nil || sb.State != want {
			t.Errorf("%s: state %q, %v; want %s", name, sb.State, err, want)
		}
	}
	if !f.called("Destroy", "killed") || !f.called("Pause", "paused") {
		t.Errorf("provider calls %v, want Destroy killed and Pause paused", f.calls)
	}
	if sb, _ := restarted.View(ctx, p, "paused"); !sb.EndAt.IsZero() {
		t.Errorf("paused at its time keeps end %v, want none (a paused sandbox waits to be resumed)", sb.EndAt)
	}
	if got, _ := restarted.ExpireDue(ctx); len(got) != 0 {
		t.Errorf("a second ExpireDue did %v, want nothing", got)
	}
}

// TestSetEnd: a token bound to a sandbox may give it more time, not less; the timeout is
// bounded; a destroyed sandbox's time cannot be set.
func TestSetEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := quartz.NewMock(t)
	st := newStore(t)
	m := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": newFake("local")}, Clock: clock})
	t.Cleanup(m.Close)
	p := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	if _, err := m.Create(ctx, p, sandbox.CreateRequest{Name: "box", Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	bound := boundTo("ada", "box")
	if _, err := m.SetEnd(ctx, bound, "box", clock.Now().Add(time.Minute)); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("bound token cutting the time short = %v, want ErrForbidden", err)
	}
	if sb, err := m.SetEnd(ctx, bound, "box", clock.Now().Add(2*time.Hour)); err != nil || !sb.EndAt.Equal(clock.Now().Add(2*time.Hour).Truncate(time.Millisecond)) {
		t.Errorf("bound token giving more time = %v, %v; want done", sb.EndAt, err)
	}
	if _, err := m.SetEnd(ctx, p, "box", clock.Now().Add(sandbox.MaxTimeout+time.Second)); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("past the longest timeout = %v, want ErrInvalid", err)
	}
	if _, err := m.SetEnd(ctx, auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}, "box", clock.Now()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another user = %v, want ErrNotFound", err)
	}
	if _, err := m.Create(ctx, p, sandbox.CreateRequest{Name: "long", Timeout: sandbox.MaxTimeout + time.Second}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Create past the longest timeout = %v, want ErrInvalid", err)
	}
	if _, err := m.Create(ctx, p, sandbox.CreateRequest{Name: "odd", OnTimeout: "explode"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Create with on-timeout explode = %v, want ErrInvalid", err)
	}
	if err := m.Destroy(ctx, p, "box"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetEnd(ctx, p, "box", clock.Now().Add(time.Hour)); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("SetEnd on a destroyed sandbox = %v, want ErrState", err)
	}
}

// destroySignal is the fake provider, saying on a channel what it destroyed.
type destroySignal struct {
	*fake
	destroyed chan string
}

func (d destroySignal) Destroy(ctx context.Context, sb provider.Sandbox) error {
	err := d.fake.Destroy(ctx, sb)
	d.destroyed <- sb.Name
	return err
}

// TestRunDeadlines: the loop ends a sandbox once the clock passes its time, not before.
func TestRunDeadlines(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := quartz.NewMock(t)
	prov := destroySignal{newFake("local"), make(chan string, 1)}
	m := sandbox.New(sandbox.Config{Store: newStore(t), Providers: map[string]provider.Provider{"local": prov}, Clock: clock})
	t.Cleanup(m.Close)
	p := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	if _, err := m.Create(ctx, p, sandbox.CreateRequest{Name: "box", Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	trap := clock.Trap().NewTicker("sandbox", "deadlines")
	defer trap.Close()
	loop, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { m.RunDeadlines(loop, time.Second); close(ran) }()
	defer func() { stop(); <-ran }()
	trap.MustWait(ctx).MustRelease(ctx)
	clock.Advance(time.Second).MustWait(ctx)
	if sb, _ := m.View(ctx, p, "box"); sb.State != "running" {
		t.Fatalf("box a second before its time = %s, want running", sb.State)
	}
	clock.Advance(time.Second).MustWait(ctx)
	select {
	case name := <-prov.destroyed:
		if name != "box" {
			t.Errorf("destroyed %s, want box", name)
		}
	case <-ctx.Done():
		t.Fatal("box was not destroyed once its time was up")
	}
}

// TestDeadlineCannotPause: a sandbox to be paused at its time, on a provider that cannot pause
// (kubernetes), is destroyed instead: its time is up all the same.
func TestDeadlineCannotPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := quartz.NewMock(t)
	f := newFake("local")
	f.fail["Pause"] = fmt.Errorf("pods cannot be paused: %w", provider.ErrUnsupported)
	m := sandbox.New(sandbox.Config{Store: newStore(t), Providers: map[string]provider.Provider{"local": f}, Clock: clock})
	t.Cleanup(m.Close)
	p := auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	if _, err := m.Create(ctx, p, sandbox.CreateRequest{Name: "pod", Timeout: time.Minute, OnTimeout: store.OnTimeoutPause}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	did, err := m.ExpireDue(ctx)
	if err != nil || len(did) != 1 || did[0].Action != store.OnTimeoutKill || did[0].Err != nil {
		t.Fatalf("ExpireDue = %+v, %v; want pod destroyed", did, err)
	}
	if sb, _ := m.View(ctx, p, "pod"); sb.State != "destroyed" {
		t.Errorf("pod = %s, want destroyed", sb.State)
	}
}
