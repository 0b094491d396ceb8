package turns

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/store"
)

// lease is a fake of the replicas' leases that several services share: one owner at a time.
type lease struct {
	mu       sync.Mutex
	owner    string
	appended map[string]int // per replica: Appended calls
	queued   []string
}

// replica is one service's view of a lease.
type replica struct {
	l  *lease
	me string
}

func (r replica) Owns(_ context.Context, sandbox string) bool {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return r.l.owner == r.me
}

func (r replica) Appended(context.Context, string, string) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.appended[r.me]++
}

func (r replica) Queued(_ context.Context, turnID string) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.queued = append(r.l.queued, turnID)
}

func (l *lease) set(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owner = owner
}

// TestTurnMovesBetweenReplicas: a turn started on a replica that does not own the sandbox is
// queued for the owner, which runs it; when the lease moves, the old owner stops watching and
// the new one watches on from the saved read position: every line recorded once.
func TestTurnMovesBetweenReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	f.cfg.Replicas = replica{l, "a"}
	a := f.service(t) // its clock driver moves the polls of both
	f.cfg.Replicas = replica{l, "b"}
	b := New(f.cfg)
	defer b.Close()

	se, err := b.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	tu, err := b.StartTurn(ctx, ada, "s1", gatedPrompt(gate)+`; echo '{"type":"three"}'`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.st.GetTurn(ctx, tu.ID); got.State != store.TurnQueued || len(l.queued) != 1 || l.queued[0] != tu.ID {
		t.Fatalf("a turn started on b: %s, queued %v; want it queued for a", got.State, l.queued)
	}
	a.TakeTurn(ctx, tu.ID)
	waitFor(t, ctx, "the first line recorded by a", func() bool {
		got, _ := f.st.GetTurn(ctx, tu.ID)
		return got.ReadPos > 0
	})

	l.set("b")
	a.Release("box")
	waitFor(t, ctx, "a to stop watching", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.watching) == 0
	})
	if err := b.ResumeSandbox(ctx, "box"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gate, nil, 0o644)
	waitTurn(t, ctx, f.st, tu.ID)
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n{\"type\":\"three\"}\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.appended["a"] == 0 || l.appended["b"] == 0 {
		t.Errorf("appends announced: %v; want some by each replica", l.appended)
	}
}
