package turns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/fsnotify/fsnotify"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/runlogtest"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

const testTimeout = 60 * time.Second

// hostSandboxes runs commands on the host with bash, as the local provider does; a sandbox is
// visible to its owner (and to admins).
type hostSandboxes struct {
	st store.Store
	mu sync.Mutex
	// envs records every env a Run got, to check secrets never land in a command line.
	cmds []string
	// follows, when set, gets each follow's command once it runs.
	follows chan string
	// breakAfter, when set, makes a follow end after its first chunk of output, as a broken
	// stream does, as many times as it holds.
	breakAfter int
	// uid, when set, is what `id -u` answers (who the sandbox runs commands as).
	uid string
	// runErr, when set, is every Run's error (a sandbox that cannot be reached).
	runErr error
}

func (h *hostSandboxes) Get(ctx context.Context, p auth.Principal, ref string) (store.Sandbox, error) {
	sb, err := h.st.GetSandbox(ctx, ref)
	if err != nil || (!p.IsAdmin() && sb.Owner != p.User) {
		return store.Sandbox{}, fmt.Errorf("%w: sandbox %s", ErrNotFound, ref)
	}
	return sb, nil
}

func (h *hostSandboxes) Create(ctx context.Context, p auth.Principal, req sandbox.CreateRequest) (string, error) {
	now := time.Now()
	sb := store.Sandbox{Name: req.Name, Owner: p.User, Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now}
	return sb.Name, h.st.CreateSandbox(ctx, sb)
}

// Follow runs command on the host, passing its output as it comes.
func (h *hostSandboxes) Follow(ctx context.Context, sb store.Sandbox, command string, out func(stream string, data []byte)) error {
	h.mu.Lock()
	h.cmds = append(h.cmds, command)
	follows := h.follows
	h.mu.Unlock()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if follows != nil {
		follows <- command
	}
	h.mu.Lock()
	breaks := h.breakAfter > 0
	if breaks {
		h.breakAfter--
	}
	h.mu.Unlock()
	buf := make([]byte, 32<<10)
	for {
		n, err := stdout.Read(buf)
		if n > 0 {
			out("stdout", buf[:n])
			if breaks {
				cmd.Process.Kill()
				cmd.Wait()
				return errors.New("stream broke")
			}
		}
		if err != nil {
			break
		}
	}
	return cmd.Wait()
}

func (h *hostSandboxes) Run(ctx context.Context, sb store.Sandbox, command string, env map[string]string) ([]byte, int, error) {
	// As a provider does, a destroyed sandbox runs nothing.
	if now, err := h.st.GetSandbox(ctx, sb.Name); err == nil && now.State == "destroyed" {
		return nil, 0, fmt.Errorf("sandbox %s is destroyed", sb.Name)
	}
	h.mu.Lock()
	h.cmds = append(h.cmds, command)
	uid, runErr := h.uid, h.runErr
	h.mu.Unlock()
	if runErr != nil {
		return nil, 0, runErr
	}
	if command == "id -u" && uid != "" {
		return []byte(uid + "\n"), 0, nil
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return out, exitErr.ExitCode(), nil
	}
	return out, 0, err
}

type fixture struct {
	st    store.Store
	sbs   *hostSandboxes
	clock *quartz.Mock
	cfg   Config
	// idle is how long service's clock driver waits for a file under the run roots to change
	// before it lets a watcher poll anyway (a harness killed, a sandbox destroyed, a read that
	// failed change no file): idlePoll, or 0 for a test whose watchers must poll again and
	// again with nothing changing.
	idle time.Duration
	// streams is the registry followers count in, once follow_test.go's follow set it.
	streams *stream.Registry
}

var (
	ada     = auth.Principal{TokenID: "tok_ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	bob     = auth.Principal{TokenID: "tok_bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
	adaJobs = auth.Principal{TokenID: "tok_adajobs", User: "ada", Scopes: []auth.Scope{auth.ScopeJobs}}
	adaJob2 = auth.Principal{TokenID: "tok_adajobs2", User: "ada", Scopes: []auth.Scope{auth.ScopeJobs}}
)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	raw, err := sqlitetest.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	st := notifying(raw)
	f := &fixture{st: st, sbs: &hostSandboxes{st: st}, clock: quartz.NewMock(t), idle: idlePoll}
	now := f.clock.Now() // the sandbox is as old as the clock the Service stamps with says
	if err := st.CreateSandbox(context.Background(), store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	f.cfg = Config{Store: st, Sandboxes: f.sbs, HarnessBinary: func(store.Sandbox) string { return hangarBin },
		RunRoot: t.TempDir(), PollInterval: 5 * time.Second, Clock: f.clock}
	return f
}

// idlePoll is how long the fixture's clock driver lets a watcher wait for its next poll
// while no file of a turn changes: long enough that a turn waiting on its gate costs little,
// short enough that a test waiting for what changes no file takes a second or so.
const idlePoll = 200 * time.Millisecond

// service starts a Service and a driver that moves the mock clock to the next timer each time
// a watcher waits for its next poll, as soon as a file under the run roots changed (or after
// f.idle), so a watcher reads what its harness wrote as soon as it is written, without a sleep.
func (f *fixture) service(t *testing.T) *Service {
	t.Helper()
	s := New(f.cfg)
	changed := fileChanges(t, f.cfg.RunRoot, f.cfg.SplitRunRoot)
	ctx, cancel := context.WithCancel(context.Background())
	trap := f.clock.Trap().NewTimer("turns")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			call, err := trap.Wait(ctx)
			if err != nil {
				return
			}
			// Released even as the test ends: a call left unreleased makes trap.Close fail
			// the test. The call completes as soon as this, its only trap, lets it go.
			if call.Release(context.WithoutCancel(ctx)) != nil {
				return
			}
			if f.idle > 0 {
				idle := time.NewTimer(f.idle)
				select {
				case <-changed:
				case <-idle.C:
				case <-ctx.Done():
				}
				idle.Stop()
			}
			// To the next timer, not a whole PollInterval: a cancelled turn polls every
			// cancelPoll, and the mock refuses to move past a timer. None: the watcher
			// stopped the one it made (a cancel woke it), and makes its next one through the
			// trap.
			d, ok := f.clock.Peek()
			if !ok {
				continue
			}
			if f.clock.Advance(d).Wait(ctx) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		s.Close()
		cancel()
		<-done // before Close: quartz's Trap.Close reads the count Release writes, unlocked
		trap.Close()
	})
	return s
}

// fileChanges returns a channel that holds a token once a file or directory under the roots
// (those that exist, or whose parent does) was made, written, moved or removed since the token
// was last taken; the directories made under them are watched too. A token is a level, not a
// count: one that is there already stands for the next change as well.
func fileChanges(t *testing.T, roots ...string) <-chan struct{} {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roots {
		if r == "" {
			continue
		}
		if w.Add(r) != nil {
			w.Add(filepath.Dir(r)) // made later: its making is seen, and it is watched then
		}
	}
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if fi, err := os.Stat(ev.Name); ev.Has(fsnotify.Create) && err == nil && fi.IsDir() {
					w.Add(ev.Name)
				}
			case _, ok := <-w.Errors: // an overflow: anything may have changed
				if !ok {
					return
				}
			}
			select {
			case changed <- struct{}{}:
			default: // a token is there already
			}
		}
	}()
	t.Cleanup(func() {
		w.Close()
		<-done
	})
	return changed
}

// pauseFD opens descriptor 9 on a pipe nobody writes to: `read -t S -u 9` then waits S
// seconds inside bash, where `sleep S` would start a process each time (a test prompt's gates
// and trickles go round hundreds of times).
const pauseFD = "exec 9<> <(:); "

// waitGate is a prompt's wait for the file gate to exist: it looks every 10 ms.
func waitGate(gate string) string {
	return pauseFD + fmt.Sprintf("while [ ! -e %q ]; do read -t 0.01 -u 9 || :; done; ", gate)
}

// replayPrompt prints the file's lines one every 2 ms, as an agent writes them.
func replayPrompt(path string) string {
	return pauseFD + fmt.Sprintf(`while IFS= read -r l || [ -n "$l" ]; do printf '%%s\n' "$l"; read -t 0.002 -u 9 || :; done < %q`, path)
}

// appendsStore is a store that says when events were appended to it, so a test waits for a
// turn's events or its end (recorded with its turn.finished) without polling the store.
type appendsStore struct {
	store.Store
	mu       sync.Mutex
	appended chan struct{} // closed at the next append, then replaced
}

func notifying(st store.Store) *appendsStore {
	return &appendsStore{Store: st, appended: make(chan struct{})}
}

func (a *appendsStore) AppendEvents(ctx context.Context, ea store.EventAppend) ([]store.Event, error) {
	evs, err := a.Store.AppendEvents(ctx, ea)
	a.mu.Lock()
	close(a.appended)
	a.appended = make(chan struct{})
	a.mu.Unlock()
	return evs, err
}

// nextAppend returns a channel closed at st's next append, when st says; else one closed after
// 10 ms (a store that does not say is polled).
func nextAppend(st store.Store) <-chan struct{} {
	if a, ok := st.(*appendsStore); ok {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.appended
	}
	ch := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(ch) })
	return ch
}

// waitAppends waits until done says so, asking it again after each append to st; false when
// ctx ends first.
func waitAppends(ctx context.Context, st store.Store, done func() bool) bool {
	for {
		next := nextAppend(st) // taken before asking: an append in between still wakes this
		if done() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-next:
		}
	}
}

// waitTurn waits until the turn has ended and its turn.finished is recorded.
func waitTurn(t *testing.T, ctx context.Context, st store.Store, id string) store.Turn {
	t.Helper()
	var tu store.Turn
	ended := waitAppends(ctx, st, func() bool {
		var err error
		tu, err = st.GetTurn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if store.TurnEnded(tu.State) {
			evs, err := st.ListEvents(ctx, tu.SessionID, 0, 100000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.TurnID == id && e.Type == TypeTurnFinished {
					return true
				}
			}
		}
		return false
	})
	if !ended {
		t.Fatalf("turn %s still %s at the deadline", id, tu.State)
	}
	return tu
}

// checkEvents checks the session's events: turn.started, each line of want once and in order,
// turn.finished; seqs gapless from 1.
func checkEvents(t *testing.T, ctx context.Context, st store.Store, sessionID string, want []byte) []store.Event {
	t.Helper()
	evs, err := st.ListEvents(ctx, sessionID, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(want, []byte("\n")), []byte("\n"))
	if len(evs) != len(lines)+2 {
		t.Fatalf("%d events, want %d lines + turn.started + turn.finished", len(evs), len(lines))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if evs[0].Type != TypeTurnStarted || evs[len(evs)-1].Type != TypeTurnFinished {
		t.Errorf("first event %s, last %s; want turn.started, turn.finished", evs[0].Type, evs[len(evs)-1].Type)
	}
	for i, l := range lines {
		if e := evs[i+1]; !bytes.Equal(e.Data, l) || e.Invalid || e.Truncated {
			t.Fatalf("event %d = %.100s, want line %d as written: %.100s", e.Seq, e.Data, i+1, l)
		}
	}
	return evs
}

func TestTurnReplaysFixtures(t *testing.T) {
	t.Parallel()
	dir := runlogtest.Dir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if _, err := os.Stat(filepath.Join(dir, twoResultsLog)); err != nil {
		t.Fatalf("the log with two results: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := newFixture(t)
			s := f.service(t)
			se, err := s.CreateSession(ctx, ada, CreateSessionRequest{Name: "replay", Sandbox: "box", Agent: "command", Env: map[string]string{"SECRET_KEY": "sk-123"}})
			if err != nil {
				t.Fatal(err)
			}
			tu, err := s.StartTurn(ctx, ada, "replay", replayPrompt(file))
			if err != nil || tu.State != store.TurnQueued {
				t.Fatalf("StartTurn = %+v, %v; want queued", tu, err)
			}
			end := waitTurn(t, ctx, f.st, tu.ID)
			if end.State != store.TurnDone || end.ExitCode == nil || *end.ExitCode != 0 {
				t.Errorf("turn ended %+v, want done with exit 0", end)
			}
			want, _ := os.ReadFile(file)
			evs := checkEvents(t, ctx, f.st, se.ID, want)
			var fin struct {
				Status  string
				Summary Summary
			}
			json.Unmarshal(evs[len(evs)-1].Data, &fin)
			if fin.Status != store.TurnDone || fin.Summary.Lines != len(evs)-2 {
				t.Errorf("turn.finished = %s", evs[len(evs)-1].Data)
			}
			if end.ReadPos != int64(len(want)) {
				t.Errorf("read position %d, want the log's length %d", end.ReadPos, len(want))
			}
			if filepath.Base(file) == twoResultsLog {
				checkTwoResults(t, end, evs)
			}
			for _, c := range f.sbs.cmds {
				if bytes.Contains([]byte(c), []byte("sk-123")) {
					t.Errorf("the agent's env is in a command line: %.100s", c)
				}
			}
		})
	}
}

func timeAfter10ms() <-chan time.Time { return time.After(10 * time.Millisecond) }
