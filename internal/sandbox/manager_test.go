package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

// States are compared as text (fmt.Sprint), whatever type the sandbox package gives them.

// fake is a provider that keeps its sandboxes in a map. Its methods fail with the error set for
// them, and Get answers what the test put in got.
type fake struct {
	name string

	mu      sync.Mutex
	made    map[string]provider.Sandbox
	fail    map[string]error            // by method name
	failed  bool                        // Create makes sandboxes that failed
	got     map[string]provider.Sandbox // Get's answer by sandbox name; absent: ErrNotFound
	calls   []string                    // "method name"
	execRes provider.ExecResult
}

func newFake(name string) *fake {
	return &fake{name: name, made: map[string]provider.Sandbox{}, fail: map[string]error{}, got: map[string]provider.Sandbox{}}
}

func (f *fake) call(method, sandbox string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+sandbox)
	return f.fail[method]
}

func (f *fake) called(method, sandbox string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c == method+" "+sandbox {
			return true
		}
	}
	return false
}

func (f *fake) Name() string { return f.name }

func (f *fake) Create(_ context.Context, spec provider.Spec) (provider.Sandbox, error) {
	if err := f.call("Create", spec.Name); err != nil {
		return provider.Sandbox{}, err
	}
	sb := provider.Sandbox{Name: spec.Name, Provider: f.name, ID: "id-" + spec.Name, State: provider.StateRunning, Workdir: "/work"}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		sb.State, sb.Reason = provider.StateFailed, "its daemon did not start"
	}
	f.made[spec.Name] = sb
	f.got[spec.Name] = sb
	return sb, nil
}

func (f *fake) Get(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	if err := f.call("Get", sb.Name); err != nil {
		return provider.Sandbox{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	got, ok := f.got[sb.Name]
	if !ok {
		return provider.Sandbox{}, provider.ErrNotFound
	}
	return got, nil
}

func (f *fake) List(context.Context) ([]provider.Sandbox, error) { return nil, nil }

func (f *fake) Destroy(_ context.Context, sb provider.Sandbox) error {
	return f.call("Destroy", sb.Name)
}

func (f *fake) Pause(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	if err := f.call("Pause", sb.Name); err != nil {
		return provider.Sandbox{}, err
	}
	sb.State = provider.StatePaused
	return sb, nil
}

func (f *fake) Resume(_ context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	if err := f.call("Resume", sb.Name); err != nil {
		return provider.Sandbox{}, err
	}
	sb.State = provider.StateRunning
	return sb, nil
}

func (f *fake) Exec(_ context.Context, sb provider.Sandbox, req provider.ExecRequest) (provider.ExecResult, error) {
	if err := f.call("Exec", sb.Name); err != nil {
		return provider.ExecResult{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.execRes, nil
}

var (
	admin = auth.Principal{TokenID: "t-admin", User: "admin", Scopes: []auth.Scope{auth.ScopeAdmin}}
	ada   = auth.Principal{TokenID: "t-ada", User: "ada", Scopes: []auth.Scope{auth.ScopeUser}}
	bob   = auth.Principal{TokenID: "t-bob", User: "bob", Scopes: []auth.Scope{auth.ScopeUser}}
)

// boundTo is a token of user bound to sandbox.
func boundTo(user, sandbox string) auth.Principal {
	return auth.Principal{TokenID: "t-" + user + "-" + sandbox, User: user, Scopes: []auth.Scope{auth.ScopeMCP}, Sandbox: sandbox}
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlitetest.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newManager(t *testing.T, st store.Store, provs ...*fake) *sandbox.Manager {
	t.Helper()
	ps := map[string]provider.Provider{}
	for _, p := range provs {
		ps[p.name] = p
	}
	m := sandbox.New(sandbox.Config{Store: st, Providers: ps, Default: provs[0].name,
		Unconfigured: map[string]string{"e2b": "set HANGAR_E2B_API_KEY"}})
	t.Cleanup(m.Close)
	return m
}

func mustCreate(t *testing.T, m *sandbox.Manager, p auth.Principal, name string) {
	t.Helper()
	if _, err := m.Create(context.Background(), p, sandbox.CreateRequest{Name: name}); err != nil {
		t.Fatalf("Create(%s) as %s: %v", name, p.User, err)
	}
}

// TestOwnership: a sandbox is its creator's; another user sees nothing of it (not found, not
// forbidden), an admin sees every one, and a token bound to a sandbox sees only that one and
// can neither make nor destroy sandboxes.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newManager(t, newStore(t), newFake("local"))
	mustCreate(t, m, ada, "ada-1")
	mustCreate(t, m, ada, "ada-2")
	mustCreate(t, m, bob, "bob-1")

	if sb, err := m.Get(ctx, ada, "ada-1"); err != nil || sb.Owner != "ada" {
		t.Errorf("ada's Get(ada-1) = %+v, %v; want hers", sb, err)
	}
	if _, err := m.Get(ctx, bob, "ada-1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's Get(ada-1) = %v, want ErrNotFound", err)
	}
	if _, err := m.Get(ctx, admin, "ada-1"); err != nil {
		t.Errorf("admin's Get(ada-1) = %v", err)
	}
	if _, err := m.Get(ctx, ada, "nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Get(nope) = %v, want ErrNotFound", err)
	}
	if err := m.Destroy(ctx, bob, "ada-1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's Destroy(ada-1) = %v, want ErrNotFound", err)
	}
	if _, err := m.Pause(ctx, bob, "ada-1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's Pause(ada-1) = %v, want ErrNotFound", err)
	}

	list := func(p auth.Principal) []string {
		t.Helper()
		sbs, err := m.List(ctx, p, false)
		if err != nil {
			t.Fatalf("List as %s: %v", p.User, err)
		}
		var names []string
		for _, sb := range sbs {
			names = append(names, sb.Name)
		}
		return names
	}
	if got := strings.Join(list(ada), ","); got != "ada-1,ada-2" {
		t.Errorf("ada's list = %s, want ada-1,ada-2", got)
	}
	if got := strings.Join(list(admin), ","); got != "ada-1,ada-2,bob-1" {
		t.Errorf("admin's list = %s", got)
	}

	bound := boundTo("ada", "ada-1")
	if got := strings.Join(list(bound), ","); got != "ada-1" {
		t.Errorf("bound token's list = %s, want ada-1", got)
	}
	if _, err := m.Get(ctx, bound, "ada-2"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bound token's Get(ada-2) = %v, want ErrNotFound", err)
	}
	if _, err := m.Create(ctx, bound, sandbox.CreateRequest{Name: "ada-3"}); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("bound token's Create = %v, want ErrForbidden", err)
	}
	if err := m.Destroy(ctx, bound, "ada-1"); !errors.Is(err, sandbox.ErrForbidden) {
		t.Errorf("bound token's Destroy = %v, want ErrForbidden", err)
	}
	// A bound token follows a name only while its user owns it.
	if _, err := m.Get(ctx, boundTo("bob", "ada-1"), "ada-1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("bob's token bound to ada-1: Get = %v, want ErrNotFound", err)
	}
}

// TestCreateRefusesBadRequests: each bad request is ErrInvalid (or ErrConflict for a taken
// name) with a sentence that names the problem, and reaches no provider.
func TestCreateRefusesBadRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	mustCreate(t, m, ada, "taken")
	for _, c := range []struct {
		req  sandbox.CreateRequest
		want error
		says string
	}{
		{sandbox.CreateRequest{Name: "Bad_Name"}, sandbox.ErrInvalid, "lowercase"},
		{sandbox.CreateRequest{Name: "ok", Provider: "e2b"}, sandbox.ErrInvalid, "HANGAR_E2B_API_KEY"},
		{sandbox.CreateRequest{Name: "ok", Provider: "nope"}, sandbox.ErrInvalid, "this server has: local"},
		{sandbox.CreateRequest{Name: "ok", Env: map[string]string{"A=B": "c"}}, sandbox.ErrInvalid, "environment variable"},
		{sandbox.CreateRequest{Name: "ok", Env: map[string]string{"A": "a\x00b"}}, sandbox.ErrInvalid, "NUL"},
		{sandbox.CreateRequest{Name: "ok", Env: map[string]string{"A": strings.Repeat("v", 128<<10)}}, sandbox.ErrInvalid, "128 KiB"},
		{sandbox.CreateRequest{Name: "ok", Workdir: "/" + strings.Repeat("w", 300)}, sandbox.ErrInvalid, "at most 255"},
		{sandbox.CreateRequest{Name: "taken"}, sandbox.ErrConflict, "exists"},
	} {
		_, err := m.Create(ctx, bob, c.req)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Create(%+v) = %v, want %v saying %q", c.req, err, c.want, c.says)
		}
	}
	if f.called("Create", "ok") || f.called("Create", "Bad_Name") {
		t.Error("a refused request reached the provider")
	}
	// An exec's environment is held to the same rule, before anything runs.
	for _, env := range []map[string]string{{"A=B": "c"}, {"": "c"}, {"A": "a\x00b"}} {
		if _, err := m.Exec(ctx, ada, "taken", sandbox.ExecRequest{Command: "true", Env: env}); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Exec with env %q = %v, want ErrInvalid", env, err)
		}
	}
	if _, err := m.Exec(ctx, ada, "taken", sandbox.ExecRequest{Command: "true", Cwd: strings.Repeat("/c", 3000)}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Exec with a 6000-byte cwd = %v, want ErrInvalid", err)
	}
	if f.called("Exec", "taken") {
		t.Error("an exec with a bad environment reached the provider")
	}
}

// TestCreateRefusedForImageIsNotListed: a sandbox refused for a missing image (the request's
// fault: nothing was made) is not listed; the error maps the provider's sentinel to ErrInvalid.
func TestCreateRefusedForImageIsNotListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	f.fail["Create"] = fmt.Errorf("image x is not there: %w", provider.ErrImageMissing)
	_, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "broken"})
	if !errors.Is(err, sandbox.ErrInvalid) || !errors.Is(err, provider.ErrImageMissing) {
		t.Fatalf("Create = %v, want ErrInvalid wrapping ErrImageMissing", err)
	}
	list, err := m.List(ctx, ada, false)
	if err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v; want nothing", list, err)
	}
}

// TestCreateFailureIsKept: a sandbox the provider could not make is kept as failed with the
// provider's reason; the error maps the provider's sentinel to the package's.
func TestCreateFailureIsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	f.fail["Create"] = fmt.Errorf("engine x is not there: %w", provider.ErrUnavailable)
	_, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "broken"})
	if !errors.Is(err, sandbox.ErrUnavailable) || !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("Create = %v, want ErrUnavailable wrapping the provider's", err)
	}
	sb, err := m.Get(ctx, ada, "broken")
	if err != nil || fmt.Sprint(sb.State) != string(provider.StateFailed) || !strings.Contains(sb.Reason, "engine x") {
		t.Fatalf("the stored sandbox = %+v, %v; want failed with the provider's reason", sb, err)
	}
	// A failed sandbox can be destroyed without asking the provider (it never made it).
	if err := m.Destroy(ctx, ada, "broken"); err != nil {
		t.Fatalf("Destroy(failed) = %v", err)
	}
	if f.called("Destroy", "broken") {
		t.Error("Destroy of a sandbox the provider never made asked the provider")
	}
	// And its name is free again.
	f.mu.Lock()
	delete(f.fail, "Create")
	f.mu.Unlock()
	mustCreate(t, m, bob, "broken")
}

// TestCreateOverAFailedSandbox: a sandbox the provider made but that failed keeps its name, and
// what it left at the provider (for its owner to look at), from other users; its owner making
// the name again replaces it, what it left going first; if that cannot go, the create says so
// and the failed sandbox stays as it was.
func TestCreateOverAFailedSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
	if _, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "flaky"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Create of a sandbox that fails = %v, want ErrUnavailable", err)
	}
	f.mu.Lock()
	f.failed = false
	f.mu.Unlock()
	if _, err := m.Create(ctx, bob, sandbox.CreateRequest{Name: "flaky"}); !errors.Is(err, sandbox.ErrConflict) {
		t.Fatalf("another user's Create over a failed sandbox = %v, want ErrConflict", err)
	}
	if f.called("Destroy", "flaky") {
		t.Fatal("another user's Create removed what a failed sandbox left")
	}
	f.mu.Lock()
	f.fail["Destroy"] = errors.New("the engine is busy")
	f.mu.Unlock()
	if _, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "flaky"}); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "failed before") {
		t.Fatalf("Create over remains that cannot be removed = %v, want ErrUnavailable saying so", err)
	}
	if sb, err := m.Get(ctx, ada, "flaky"); err != nil || sb.ProviderID != "id-flaky" || sb.State != string(provider.StateFailed) {
		t.Fatalf("after that, the sandbox = %+v, %v; want the failed one, as it was", sb, err)
	}
	f.mu.Lock()
	if n := slices.Index(f.calls, "Create flaky"); slices.Contains(f.calls[n+1:], "Create flaky") {
		t.Errorf("the provider was asked to make the name over the remains: %v", f.calls)
	}
	delete(f.fail, "Destroy")
	f.mu.Unlock()
	mustCreate(t, m, ada, "flaky")
	if !f.called("Destroy", "flaky") {
		t.Error("the failed sandbox's remains were not removed before its name was made again")
	}
}

// TestLifecycle: running → paused → running → destroyed, each move checked against the state it
// starts from, and a destroyed sandbox listed only with all.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	sb, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "life"})
	if err != nil || fmt.Sprint(sb.State) != string(provider.StateRunning) {
		t.Fatalf("Create = %+v, %v; want running", sb, err)
	}
	if _, err := m.Resume(ctx, ada, "life"); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Resume(running) = %v, want ErrState", err)
	}
	if sb, err := m.Pause(ctx, ada, "life"); err != nil || fmt.Sprint(sb.State) != string(provider.StatePaused) {
		t.Fatalf("Pause = %+v, %v", sb, err)
	}
	if _, err := m.Pause(ctx, ada, "life"); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Pause(paused) = %v, want ErrState", err)
	}
	if _, err := m.Runnable(ctx, ada, "life"); !errors.Is(err, sandbox.ErrState) || !strings.Contains(err.Error(), "resume it first") {
		t.Errorf("Runnable(paused) = %v, want ErrState saying to resume", err)
	}
	if sb, err := m.Resume(ctx, ada, "life"); err != nil || fmt.Sprint(sb.State) != string(provider.StateRunning) {
		t.Fatalf("Resume = %+v, %v", sb, err)
	}
	if got, err := m.Get(ctx, ada, "life"); err != nil || fmt.Sprint(got.State) != string(provider.StateRunning) {
		t.Fatalf("stored after Resume = %+v, %v", got, err)
	}
	f.mu.Lock()
	f.fail["Pause"] = fmt.Errorf("no: %w", provider.ErrUnsupported)
	f.mu.Unlock()
	if _, err := m.Pause(ctx, ada, "life"); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Pause the provider cannot do = %v, want ErrState", err)
	}
	if err := m.Destroy(ctx, ada, "life"); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	if !f.called("Destroy", "life") {
		t.Error("Destroy did not reach the provider")
	}
	if err := m.Destroy(ctx, ada, "life"); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Destroy(destroyed) = %v, want ErrState", err)
	}
	if sbs, _ := m.List(ctx, ada, false); len(sbs) != 0 {
		t.Errorf("List = %+v, want no live sandbox", sbs)
	}
	if sbs, _ := m.List(ctx, ada, true); len(sbs) != 1 || fmt.Sprint(sbs[0].State) != string(provider.StateDestroyed) {
		t.Errorf("List(all) = %+v, want the destroyed one", sbs)
	}
	// A destroyed sandbox's name can be taken again, by anyone.
	mustCreate(t, m, bob, "life")
	if _, err := m.Get(ctx, ada, "life"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ada's Get of bob's new life = %v, want ErrNotFound", err)
	}
}

// TestDestroyProviderGone: a sandbox its provider no longer has is destroyed all the same; a
// provider that does not answer leaves it as it was, with ErrUnavailable.
func TestDestroyProviderGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFake("local")
	m := newManager(t, newStore(t), f)
	mustCreate(t, m, ada, "gone")
	mustCreate(t, m, ada, "down")
	f.fail["Destroy"] = provider.ErrNotFound
	if err := m.Destroy(ctx, ada, "gone"); err != nil {
		t.Fatalf("Destroy(gone at the provider) = %v", err)
	}
	f.fail["Destroy"] = fmt.Errorf("engine: %w", provider.ErrUnavailable)
	if err := m.Destroy(ctx, ada, "down"); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Destroy(provider down) = %v, want ErrUnavailable", err)
	}
	if sb, _ := m.Get(ctx, ada, "down"); fmt.Sprint(sb.State) != string(provider.StateRunning) {
		t.Errorf("after a failed Destroy the sandbox is %s, want running", sb.State)
	}
}

// TestReconcile: at start every live sandbox is asked about again: one the provider still runs
// stays, one it paused is paused, one it lost is failed, one whose provider does not answer or
// is not set up is left as it was; destroyed ones are not asked about.
func TestReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	local, other := newFake("local"), newFake("other")
	before := newManager(t, st, local, other)
	for _, name := range []string{"alive", "paused", "lost", "dead-daemon", "destroyed"} {
		mustCreate(t, before, ada, name)
	}
	if _, err := before.Create(ctx, ada, sandbox.CreateRequest{Name: "elsewhere", Provider: "other"}); err != nil {
		t.Fatalf("Create(elsewhere): %v", err)
	}
	if err := before.Destroy(ctx, ada, "destroyed"); err != nil {
		t.Fatalf("Destroy: %v", err)
	}

	// What the provider says while hangar was down.
	local.mu.Lock()
	p := local.got["paused"]
	p.State = provider.StatePaused
	local.got["paused"] = p
	delete(local.got, "lost")
	d := local.got["dead-daemon"]
	d.State, d.Reason = provider.StateFailed, "the daemon exited"
	local.got["dead-daemon"] = d
	local.calls = nil
	local.mu.Unlock()

	after := newManager(t, st, local) // "other" is not set up any more
	after.Reconcile(ctx)
	for name, want := range map[string]string{
		"alive": "running", "paused": "paused", "lost": "failed", "dead-daemon": "failed",
		"destroyed": "destroyed", "elsewhere": "running",
	} {
		sb, err := after.Get(ctx, admin, name)
		if err != nil || fmt.Sprint(sb.State) != want {
			t.Errorf("%s after Reconcile = %q, %v; want %s", name, sb.State, err, want)
		}
	}
	if sb, _ := after.Get(ctx, admin, "lost"); !strings.Contains(sb.Reason, "no longer has") {
		t.Errorf("lost's reason = %q, want it to say the provider no longer has it", sb.Reason)
	}
	if local.called("Get", "destroyed") {
		t.Error("Reconcile asked the provider about a destroyed sandbox")
	}
}
