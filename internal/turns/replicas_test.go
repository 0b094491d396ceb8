package turns

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// sessionTurn makes session s1 of sandbox box through svc and starts a turn of prompt in it.
func sessionTurn(t *testing.T, ctx context.Context, svc *Service, prompt string) (Session, Turn) {
	t.Helper()
	se, err := svc.CreateSession(ctx, ada, CreateSessionRequest{Name: "s1", Sandbox: "box", Agent: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tu, err := svc.StartTurn(ctx, ada, "s1", prompt)
	if err != nil {
		t.Fatal(err)
	}
	return se, tu
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
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	f.cfg.Replicas = replica{l, "a"}
	a := f.service(t) // its clock driver moves the polls of both
	f.cfg.Replicas = replica{l, "b"}
	b := New(f.cfg)
	defer b.Close()

	gate := filepath.Join(t.TempDir(), "gate")
	se, tu := sessionTurn(t, ctx, b, gatedPrompt(gate)+`; echo '{"type":"three"}'`)
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

// gaining is a replica's view of a lease handed to it while it starts a turn: the lease moves to
// it as it announces the turn as queued for the owner it asked about.
type gaining struct{ replica }

func (g gaining) Queued(ctx context.Context, turnID string) {
	g.replica.Queued(ctx, turnID)
	g.l.set(g.me)
}

// TestTurnQueuedAsTheLeaseArrives: a replica that starts a turn while the sandbox's lease is
// handed to it (asked, the lease was another's; once the turn is stored, its own, its look for
// queued turns already done) runs the turn itself: its notice reaches only the other replicas,
// and the old owner starts nothing more.
func TestTurnQueuedAsTheLeaseArrives(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	f.cfg.Replicas = gaining{replica{l, "b"}}
	b := f.service(t)
	se, tu := sessionTurn(t, ctx, b, `echo '{"type":"one"}'`)
	waitTurn(t, ctx, f.st, tu.ID)
	if got, _ := f.st.GetTurn(ctx, tu.ID); got.State != store.TurnDone {
		t.Errorf("the turn ended %s (%s), want done", got.State, got.Reason)
	}
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n"))
}

// TestQueuedTurnOnLeaseMove: a turn queued for a replica that never began to launch it is run by
// the sandbox's next owner, whether the lease was handed over (the first released it, as a
// shutdown or a balancing does) or taken (from a replica that died, or from nobody: the chaos
// test's turn queued for a replica that had just taken a free lease, and failed by that very
// replica's resume of the sandbox); the same when the lease came as the next owner started (its
// Resume). A turn whose launch began and was not recorded fails: its harness may run.
func TestQueuedTurnOnLeaseMove(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		handed   bool // a released the sandbox first
		launched bool // a began the launch, and died before it recorded it
		start    bool // b gained the lease as it started: its Resume
		want     string
	}{
		{"handed over", true, false, false, store.TurnDone},
		{"taken over", false, false, false, store.TurnDone},
		{"taken over mid-launch", false, true, false, store.TurnFailed},
		{"handed over as it started", true, false, true, store.TurnDone},
		{"owned as it started", false, false, true, store.TurnDone},
		{"owned as it started, mid-launch", false, true, true, store.TurnFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := newFixture(t)
			l := &lease{owner: "a", appended: map[string]int{}}
			f.cfg.Replicas = replica{l, "a"}
			a := f.service(t)
			f.cfg.Replicas = replica{l, "b"}
			b := New(f.cfg)
			defer b.Close()

			se, tu := sessionTurn(t, ctx, b, `echo '{"type":"one"}'`)
			// a had not acted on the notification of it when the lease moved, or had begun to
			// launch its harness (as its start records first).
			if c.launched {
				if err := f.st.BeginLaunch(ctx, tu.ID); err != nil {
					t.Fatal(err)
				}
			}
			if c.handed {
				a.Release("box")
			}
			l.set("b")
			resume := func() error { return b.ResumeSandbox(ctx, "box") }
			if c.start {
				resume = func() error { return b.Resume(ctx) }
			}
			if err := resume(); err != nil {
				t.Fatal(err)
			}
			got := waitTurn(t, ctx, f.st, tu.ID)
			if got.State != c.want {
				t.Fatalf("the queued turn ended %s (%s); want %s", got.State, got.Reason, c.want)
			}
			if c.want == store.TurnFailed && got.Reason != ReasonLaunchCut {
				t.Errorf("the turn failed with %q; want %q", got.Reason, ReasonLaunchCut)
			}
			if c.want == store.TurnDone {
				checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n"))
			}
		})
	}
}

// countLaunches counts the harness launches run through it.
type countLaunches struct {
	Sandboxes
	n atomic.Int32
}

func (s *countLaunches) Run(ctx context.Context, sb store.Sandbox, command string, env map[string]string) ([]byte, int, error) {
	if strings.Contains(command, " harness --detach ") {
		s.n.Add(1)
	}
	return s.Sandboxes.Run(ctx, sb, command, env)
}

// TestOneLaunchPerTurn: a replica that owns the sandbox (its lease taken from a replica
// thought dead, which in fact goes on) finds the turn's launch begun by the other, and
// launches no second harness: the turn is the other's to record.
func TestOneLaunchPerTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	cl := &countLaunches{Sandboxes: f.sbs}
	f.cfg.Sandboxes = cl
	f.cfg.Replicas = replica{l, "b"}
	b := f.service(t)

	_, tu := sessionTurn(t, ctx, b, `echo '{"type":"one"}'`)
	if err := f.st.BeginLaunch(ctx, tu.ID); err != nil { // a's start, under way
		t.Fatal(err)
	}
	l.set("b")
	b.TakeTurn(ctx, tu.ID)
	waitFor(t, ctx, "b to give the turn up", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.watching) == 0
	})
	if got, _ := f.st.GetTurn(ctx, tu.ID); got.State != store.TurnQueued || cl.n.Load() != 0 {
		t.Errorf("the turn is %s (%s), and b launched %d harnesses; want it queued, and none", got.State, got.Reason, cl.n.Load())
	}
}

// slowLaunch runs the harness's launch as the sandboxes do, then holds its answer until open
// is closed: a start under way, its harness launched and not yet recorded.
type slowLaunch struct {
	Sandboxes
	launched chan struct{} // closed once the harness was launched
	open     chan struct{}
	once     sync.Once
}

func (s *slowLaunch) Run(ctx context.Context, sb store.Sandbox, command string, env map[string]string) ([]byte, int, error) {
	out, code, err := s.Sandboxes.Run(ctx, sb, command, env)
	if strings.Contains(command, " harness --detach ") {
		s.once.Do(func() { close(s.launched) })
		select {
		case <-s.open:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return out, code, err
}

// TestReleaseWaitsForStart: a release while a turn's harness is being launched waits for the
// start to be recorded, so the sandbox's next owner, handed the lease, watches the turn
// (running) rather than launch it a second time; every line is recorded once.
func TestReleaseWaitsForStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	slow := &slowLaunch{Sandboxes: f.sbs, launched: make(chan struct{}), open: make(chan struct{})}
	f.cfg.Sandboxes = slow
	f.cfg.Replicas = replica{l, "a"}
	a := f.service(t)
	f.cfg.Sandboxes = f.sbs
	f.cfg.Replicas = replica{l, "b"}
	b := New(f.cfg)
	defer b.Close()

	gate := filepath.Join(t.TempDir(), "gate")
	se, tu := sessionTurn(t, ctx, b, gatedPrompt(gate))
	a.TakeTurn(ctx, tu.ID)
	select {
	case <-slow.launched:
	case <-ctx.Done():
		t.Fatal("a never launched the turn's harness")
	}
	released := make(chan struct{})
	go func() { defer close(released); a.Release("box") }()
	waitFor(t, ctx, "a to begin releasing the sandbox", func() bool { return a.released("box") == 1 })
	select {
	case <-released:
		t.Fatal("Release returned while a turn's start was under way in the sandbox")
	default:
	}
	close(slow.open)
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("Release did not return once the start was recorded")
	}
	if got, _ := f.st.GetTurn(ctx, tu.ID); got.State != store.TurnRunning {
		t.Fatalf("after the release the turn is %s (%s); want running, as a recorded", got.State, got.Reason)
	}

	l.set("b")
	finishGated(t, ctx, f, b, gate, se, tu)
}

// finishGated resumes the sandbox on svc, opens the turn's gate and checks that the turn ends
// done with each of gatedPrompt's two lines recorded once.
func finishGated(t *testing.T, ctx context.Context, f *fixture, svc *Service, gate string, se Session, tu Turn) {
	t.Helper()
	if err := svc.ResumeSandbox(ctx, "box"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gate, nil, 0o644)
	if got := waitTurn(t, ctx, f.st, tu.ID); got.State != store.TurnDone {
		t.Fatalf("the turn ended %s (%s); want done", got.State, got.Reason)
	}
	checkEvents(t, ctx, f.st, se.ID, []byte("{\"type\":\"one\"}\n{\"type\":\"two\"}\n"))
}

// blockingOwns is a replica whose Owns, once armed, says it was asked and then waits for
// proceed: a lease's answer that comes late, on a loaded database.
type blockingOwns struct {
	replica
	armed   chan struct{} // closed: Owns blocks
	asked   chan struct{} // gets a value when an armed Owns is asked
	proceed chan struct{}
}

func (r blockingOwns) Owns(ctx context.Context, sandbox string) bool {
	select {
	case <-r.armed:
		r.asked <- struct{}{}
		<-r.proceed
	default:
	}
	return r.replica.Owns(ctx, sandbox)
}

// TestTakeTurnStartedMeanwhile: a replica told of a queued turn reads it queued, then waits for
// the sandbox's lease; meanwhile the owner starts the turn and hands the lease over. The new
// owner watches the turn, running, rather than launch its harness a second time (which failed
// it with "make turn directory: file exists" in the replicas' chaos test); every line is
// recorded once.
func TestTakeTurnStartedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFixture(t)
	l := &lease{owner: "a", appended: map[string]int{}}
	f.cfg.Replicas = replica{l, "a"}
	a := f.service(t)
	bo := blockingOwns{replica: replica{l, "b"}, armed: make(chan struct{}), asked: make(chan struct{}, 1), proceed: make(chan struct{})}
	f.cfg.Replicas = bo
	b := New(f.cfg)
	defer b.Close()

	gate := filepath.Join(t.TempDir(), "gate")
	se, tu := sessionTurn(t, ctx, b, gatedPrompt(gate)) // a owns the sandbox: queued for it
	close(bo.armed)
	took := make(chan struct{})
	go func() { defer close(took); b.TakeTurn(ctx, tu.ID) }()
	select {
	case <-bo.asked: // b read the turn queued and waits for the lease
	case <-ctx.Done():
		t.Fatal("b never asked for the lease")
	}
	a.TakeTurn(ctx, tu.ID)
	waitFor(t, ctx, "a to start the turn", func() bool {
		got, _ := f.st.GetTurn(ctx, tu.ID)
		return got.State == store.TurnRunning
	})
	a.Release("box")
	l.set("b")
	close(bo.proceed)
	<-took
	finishGated(t, ctx, f, b, gate, se, tu)
}
