// Package sandbox manages sandboxes for the transports: who may see which, making them through a
// provider, keeping them in the store so a restarted control plane knows them, and running a
// command in one — through its daemon when it has one, else through the provider's own exec.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNotFound means no sandbox of that name is visible to the caller.
	ErrNotFound error = &problem.Sentinel{Text: "no such sandbox", Code: problem.CodeNotFound,
		Message: "There is no such sandbox, or this token may not use it."}
	// ErrConflict means the name is taken.
	ErrConflict error = &problem.Sentinel{Text: "sandbox name taken", Code: problem.CodeConflict, Message: "That sandbox name is taken."}
	// ErrInvalid means the request is malformed (bad name, unknown provider, bad timeout).
	ErrInvalid error = &problem.Sentinel{Text: "invalid sandbox request", Code: problem.CodeBadRequest, Message: "The request is not valid."}
	// ErrForbidden means the caller's token may not do this (e.g. a token bound to a sandbox
	// making another).
	ErrForbidden error = &problem.Sentinel{Text: "not allowed", Code: problem.CodeForbidden, Message: "The token is not allowed to do that."}
	// ErrState means the sandbox is not in a state that allows this (exec on a paused one). What
	// it is wrapped with says which state, and why, to a client.
	ErrState error = stateError{}
	// ErrUnavailable means the provider or the sandbox's daemon does not answer.
	ErrUnavailable error = &problem.Sentinel{Text: "unavailable", Code: problem.CodeUnavailable,
		Message: "The sandbox's provider or daemon does not answer."}
)

// Config configures a Manager.
type Config struct {
	// Store keeps the sandboxes. Required.
	Store store.Store
	// Providers by name (local, docker, kubernetes, e2b). Required: at least one.
	Providers map[string]provider.Provider
	// Unconfigured names providers hangar knows but that were not set up, each with the
	// sentence that says how to set it up, for the error a request naming one gets.
	Unconfigured map[string]string
	// Streams, when set, has the streams of a sandbox ended when it is destroyed or paused.
	Streams *stream.Registry
	// Default is the provider of a request that names none. Default "local".
	Default string
	// CreateTimeout bounds a provider's Create (pulling nothing, starting a daemon). Default 5m.
	CreateTimeout time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Clock stamps sandboxes, times execs' timeouts and tells when a sandbox's time is up.
	// Default the real clock.
	Clock quartz.Clock
	// Owners, with several replicas on one database, says which one ends a sandbox whose time
	// is up (ExpireDue). Nil: this Manager ends them all.
	Owners Owners
}

// Manager is the sandboxes' domain service. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // guards daemons and destroying
	daemons map[daemonKey]*envd.Client
	// destroying counts the Destroys under way by sandbox name: a daemon that breaks meanwhile
	// broke because of the destroy, and the sandbox is reported destroyed, not failed.
	destroying map[string]int
}

type daemonKey struct{ sandbox, url, token string }

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Default == "" {
		cfg.Default = "local"
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, daemons: map[daemonKey]*envd.Client{}, destroying: map[string]int{}}
}

// Sandbox is a sandbox as hangar's clients see it: the store's row without what stays inside
// hangar (the daemon's address and access token, the provider's own facts).
type Sandbox struct {
	Name       string
	Owner      string // the user who made it
	Provider   string // local, docker, kubernetes, e2b
	ProviderID string // the provider's own id
	State      string // creating, running, paused, destroyed, failed
	Reason     string // why it failed, for a person
	Image      string
	Template   string
	Workdir    string
	Env        map[string]string
	HasDaemon  bool // it has a daemon that answers exec
	Metadata   map[string]string
	EndAt      time.Time // when its time is up (OnTimeout); zero: never
	OnTimeout  string    // store.OnTimeoutKill or store.OnTimeoutPause; "": made without a timeout (killed if one is set)
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// view is the row as clients see it.
func view(sb store.Sandbox) Sandbox {
	return Sandbox{Name: sb.Name, Owner: sb.Owner, Provider: sb.Provider, ProviderID: sb.ProviderID, State: sb.State,
		Reason: sb.Reason, Image: sb.Image, Template: sb.Template, Workdir: sb.Workdir, Env: sb.Env, HasDaemon: sb.DaemonURL != "",
		Metadata: sb.Metadata, EndAt: sb.EndAt, OnTimeout: sb.OnTimeout, CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt}
}

// CreateRequest is what a sandbox is made from.
type CreateRequest struct {
	Name     string
	Provider string // "": the default
	Image    string
	Template string
	Workdir  string
	Env      map[string]string
	Daemon   *bool // nil: true
	// Metadata labels the sandbox for its owner (the E2B API's metadata). Default none.
	Metadata map[string]string
	// Timeout, when set, is how long the sandbox may live from now: then it is destroyed, or
	// paused when OnTimeout is store.OnTimeoutPause (RunDeadlines). Default 0: for good.
	Timeout   time.Duration
	OnTimeout string
}

// visible reports whether p may see sb: an admin every one, anyone else only their own user's,
// and a bound token only its sandbox among those. The owner is checked on every request, not
// only when the token was made: a name can change hands (destroyed, then made again by someone
// else), and a bound token must never follow it to another user's sandbox.
func visible(p auth.Principal, sb store.Sandbox) bool {
	if p.IsAdmin() { // never a bound token
		return true
	}
	return sb.Owner == p.User && (p.Sandbox == "" || sb.Name == p.Sandbox)
}

// View returns the sandbox ref if p may see it.
func (m *Manager) View(ctx context.Context, p auth.Principal, ref string) (Sandbox, error) {
	sb, err := m.Get(ctx, p, ref)
	return view(sb), err
}

// Get returns the stored sandbox ref if p may see it, for the domain's own work on it (the
// process manager); transports use View.
func (m *Manager) Get(ctx context.Context, p auth.Principal, ref string) (store.Sandbox, error) {
	sb, err := m.cfg.Store.GetSandbox(ctx, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !visible(p, sb)) {
		return store.Sandbox{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return sb, err
}

// Lookup returns the stored sandbox name, whoever owns it: for hangar's own work on a sandbox
// (following a background process), never for a request. store.ErrNotFound if there is none.
func (m *Manager) Lookup(ctx context.Context, name string) (store.Sandbox, error) {
	return m.cfg.Store.GetSandbox(ctx, name)
}

// List returns the sandboxes p may see, destroyed ones left out unless all is set.
func (m *Manager) List(ctx context.Context, p auth.Principal, all bool) ([]Sandbox, error) {
	owner := p.User
	if p.IsAdmin() {
		owner = ""
	}
	sbs, err := m.cfg.Store.ListSandboxes(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []Sandbox
	for _, sb := range sbs {
		if visible(p, sb) && (all || sb.State != string(provider.StateDestroyed)) {
			out = append(out, view(sb))
		}
	}
	return out, nil
}

// Create makes a sandbox owned by p's user and waits until it runs. A sandbox the provider could
// not make is kept as failed, with the reason, and the error says why; one it refused for the
// request's fault (an image it does not have) is not listed at all (stored as destroyed).
func (m *Manager) Create(ctx context.Context, p auth.Principal, req CreateRequest) (Sandbox, error) {
	sb, err := m.create(ctx, p, req)
	return view(sb), err
}

func (m *Manager) create(ctx context.Context, p auth.Principal, req CreateRequest) (store.Sandbox, error) {
	if p.Sandbox != "" {
		return store.Sandbox{}, fmt.Errorf("%w: this token is bound to sandbox %s and cannot make others", ErrForbidden, p.Sandbox)
	}
	if err := provider.CheckName(req.Name); err != nil {
		return store.Sandbox{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if req.Provider == "" {
		req.Provider = m.cfg.Default
	}
	prov, ok := m.cfg.Providers[req.Provider]
	if !ok {
		if how, known := m.cfg.Unconfigured[req.Provider]; known {
			return store.Sandbox{}, fmt.Errorf("%w: the %s provider is not set up here: %s", ErrInvalid, req.Provider, how)
		}
		return store.Sandbox{}, fmt.Errorf("%w: unknown provider %q (this server has: %s)", ErrInvalid, req.Provider, strings.Join(m.providerNames(), ", "))
	}
	if err := limits.CheckEnv(req.Env); err != nil {
		return store.Sandbox{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := limits.CheckPath(req.Workdir); err != nil {
		return store.Sandbox{}, fmt.Errorf("%w: workdir: %v", ErrInvalid, err)
	}
	if err := checkLifetime(req); err != nil {
		return store.Sandbox{}, err
	}
	// Before the row is stored: a spec the provider would refuse leaves nothing listed.
	if c, ok := prov.(provider.SpecChecker); ok {
		if err := c.CheckSpec(provider.Spec{Name: req.Name, Owner: p.User, Image: req.Image, Template: req.Template, Workdir: req.Workdir, Env: req.Env}); err != nil {
			return store.Sandbox{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	// A failed sandbox of the caller's own that has the name is replaced (the store lets no
	// one else take its name); what it left at its provider goes once the name is ours.
	old, oldErr := m.cfg.Store.GetSandbox(ctx, req.Name)
	daemon := req.Daemon == nil || *req.Daemon
	now := m.cfg.Clock.Now().Truncate(time.Millisecond)
	sb := store.Sandbox{
		Name: req.Name, Owner: p.User, Provider: req.Provider, State: string(provider.StateCreating),
		Image: req.Image, Template: req.Template, Workdir: req.Workdir, Env: req.Env, Daemon: daemon,
		Metadata: req.Metadata, OnTimeout: req.OnTimeout, CreatedAt: now, UpdatedAt: now,
	}
	if req.Timeout > 0 {
		sb.EndAt = now.Add(req.Timeout)
	}
	if err := m.cfg.Store.CreateSandbox(ctx, sb); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Sandbox{}, fmt.Errorf("%w: a sandbox named %s exists; pick another name or delete it first", ErrConflict, req.Name)
		}
		return store.Sandbox{}, err
	}
	// The provider's work goes on if the client goes away, so the stored state stays true.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	if oldErr == nil && old.State == string(provider.StateFailed) && old.Owner == p.User {
		if err := m.clearFailed(cctx, old); err != nil {
			// The name stays the failed sandbox's, so a retry finds its remains; the row is the
			// new one's (its created_at), which the store writes only to that.
			old.CreatedAt = sb.CreatedAt
			m.save(cctx, old)
			return old, err
		}
	}
	made, err := prov.Create(cctx, provider.Spec{
		Name: req.Name, Owner: p.User, Image: req.Image, Template: req.Template, Workdir: req.Workdir, Env: req.Env, Daemon: daemon,
	})
	if err != nil {
		sb.State, sb.Reason = string(provider.StateFailed), err.Error()
		if errors.Is(err, provider.ErrImageMissing) {
			// The request was at fault and nothing was made: nothing stays listed.
			sb.State = string(provider.StateDestroyed)
		}
		m.save(cctx, sb)
		return sb, providerError("create sandbox "+req.Name, err)
	}
	sb = merge(sb, made, m.cfg.Clock.Now())
	if err := m.save(cctx, sb); err != nil {
		if errors.Is(err, ErrState) {
			// Deleted while it was made: what the provider made goes too, and it stays destroyed.
			if derr := prov.Destroy(cctx, made); derr != nil && !errors.Is(derr, provider.ErrNotFound) {
				m.log.Warn("destroy a sandbox deleted while it was made", "sandbox", sb.Name, "err", derr)
			}
		}
		return sb, err
	}
	if sb.State == string(provider.StateFailed) {
		return sb, fmt.Errorf("%w: sandbox %s failed: %s", ErrUnavailable, sb.Name, sb.Reason)
	}
	return sb, nil
}

// clearFailed removes what the failed sandbox old left at its provider (a local folder with its
// daemon's log, a container), which is kept for its owner to look at until it is destroyed or
// its owner makes the name again, as now: the provider could not make the name over what is
// left. The new sandbox's row has replaced old's, so no other create of the name gets here.
func (m *Manager) clearFailed(ctx context.Context, old store.Sandbox) error {
	if old.ProviderID == "" {
		return nil // the provider never made it
	}
	prov, err := m.provider(old)
	if err != nil {
		return nil // a provider no longer set up: nothing of it can be in the way
	}
	if err := prov.Destroy(ctx, providerView(old)); err != nil && !errors.Is(err, provider.ErrNotFound) {
		return fmt.Errorf("%w: a sandbox named %s failed before, and what it left could not be removed: %w", ErrUnavailable, old.Name, err)
	}
	return nil
}

func (m *Manager) providerNames() []string {
	names := slices.Collect(maps.Keys(m.cfg.Providers))
	sort.Strings(names)
	return names
}

// stateError is ErrState.
type stateError struct{}

func (stateError) Error() string { return "sandbox state does not allow this" }

// Problem says which state refused the request, and why the sandbox is in it when it failed
// ("Sandbox box failed: its daemon is not running."), where err says so.
func (e stateError) Problem(err error) *problem.Problem {
	msg := "The sandbox is not in a state that allows this."
	if _, what, ok := strings.Cut(err.Error(), e.Error()+": "); ok && what != "" {
		msg = problem.Sentence(what)
	}
	return problem.New(problem.CodeConflict, msg, err)
}

// providerError maps a provider's error to this package's, keeping the provider's sentinel
// reachable with errors.Is.
func providerError(op string, err error) error {
	switch {
	case errors.Is(err, provider.ErrImageMissing):
		return fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	case errors.Is(err, provider.ErrUnavailable):
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	case errors.Is(err, provider.ErrUnsupported), errors.Is(err, provider.ErrNotFound):
		return fmt.Errorf("%s: %w: %w", op, ErrState, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// merge copies what a provider says of a sandbox onto its stored record.
func merge(sb store.Sandbox, made provider.Sandbox, now time.Time) store.Sandbox {
	sb.ProviderID, sb.State, sb.Reason, sb.Data = made.ID, string(made.State), made.Reason, made.Data
	if made.Workdir != "" {
		sb.Workdir = made.Workdir
	}
	sb.DaemonURL, sb.DaemonToken = "", ""
	if made.Daemon != nil {
		sb.DaemonURL, sb.DaemonToken = made.Daemon.URL, made.Daemon.AccessToken
	}
	sb.UpdatedAt = now.Truncate(time.Millisecond)
	return sb
}

// providerView is the stored sandbox as its provider was told of it.
func providerView(sb store.Sandbox) provider.Sandbox {
	ps := provider.Sandbox{Name: sb.Name, Provider: sb.Provider, ID: sb.ProviderID, State: provider.State(sb.State),
		Reason: sb.Reason, Workdir: sb.Workdir, Data: sb.Data}
	if sb.DaemonURL != "" {
		ps.Daemon = &provider.Daemon{URL: sb.DaemonURL, AccessToken: sb.DaemonToken}
	}
	return ps
}

// save stores sb over the stored row of the same sandbox. A sandbox destroyed, or whose name
// was taken again, since sb was read is left as it is: that is ErrState.
func (m *Manager) save(ctx context.Context, sb store.Sandbox) error {
	sb.UpdatedAt = m.cfg.Clock.Now().Truncate(time.Millisecond)
	err := m.cfg.Store.UpdateSandbox(ctx, sb)
	switch {
	case errors.Is(err, store.ErrConflict):
		m.log.Info("sandbox destroyed meanwhile; left as it is", "sandbox", sb.Name, "state", sb.State)
		return fmt.Errorf("%w: sandbox %s was destroyed meanwhile", ErrState, sb.Name)
	case err != nil:
		m.log.Error("save sandbox", "sandbox", sb.Name, "err", err)
		return err
	}
	return nil
}

func (m *Manager) provider(sb store.Sandbox) (provider.Provider, error) {
	prov, ok := m.cfg.Providers[sb.Provider]
	if !ok {
		return nil, fmt.Errorf("%w: sandbox %s is on the %s provider, which this server does not have set up", ErrUnavailable, sb.Name, sb.Provider)
	}
	return prov, nil
}

// Destroy destroys the sandbox ref. It stays listed as destroyed (with ?all) until its name is
// taken again.
func (m *Manager) Destroy(ctx context.Context, p auth.Principal, ref string) error {
	sb, err := m.Get(ctx, p, ref)
	if err != nil {
		return err
	}
	if p.Sandbox != "" {
		return fmt.Errorf("%w: a token bound to a sandbox cannot destroy it", ErrForbidden)
	}
	return m.destroy(ctx, sb)
}

// destroy destroys the stored sandbox sb, for whoever may.
func (m *Manager) destroy(ctx context.Context, sb store.Sandbox) error {
	if sb.State == string(provider.StateDestroyed) {
		return fmt.Errorf("%w: sandbox %s is already destroyed", ErrState, sb.Name)
	}
	prov, err := m.provider(sb)
	if err != nil {
		return err
	}
	defer m.markDestroying(sb.Name)()
	m.endStreams(sb.Name, stream.ReasonDestroyed)
	if sb.ProviderID != "" || sb.State != string(provider.StateFailed) {
		if err := prov.Destroy(ctx, providerView(sb)); err != nil && !errors.Is(err, provider.ErrNotFound) {
			return providerError("destroy sandbox "+sb.Name, err)
		}
	}
	m.forgetDaemon(sb.Name)
	sb.State, sb.Reason = string(provider.StateDestroyed), ""
	return m.save(context.WithoutCancel(ctx), sb)
}

// markDestroying records that a Destroy of the sandbox name is under way, until the function
// it returns is called.
func (m *Manager) markDestroying(name string) func() {
	m.mu.Lock()
	m.destroying[name]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.destroying[name]--; m.destroying[name] <= 0 {
			delete(m.destroying, name)
		}
	}
}

// beingDestroyed reports whether a Destroy of the sandbox name is under way.
func (m *Manager) beingDestroyed(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.destroying[name] > 0
}

// Pause pauses a running sandbox; its streams end (their commands are not killed).
func (m *Manager) Pause(ctx context.Context, p auth.Principal, ref string) (Sandbox, error) {
	return m.transition(ctx, p, ref, provider.StateRunning, "pause", m.pause)
}

func (m *Manager) pause(prov provider.Provider, ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	m.endStreams(sb.Name, stream.ReasonPaused)
	return prov.Pause(ctx, sb)
}

func (m *Manager) endStreams(name string, reason stream.Reason) {
	if m.cfg.Streams != nil {
		m.cfg.Streams.EndSandbox(name, reason)
	}
}

// Resume resumes a paused sandbox.
func (m *Manager) Resume(ctx context.Context, p auth.Principal, ref string) (Sandbox, error) {
	return m.transition(ctx, p, ref, provider.StatePaused, "resume", provider.Provider.Resume)
}

func (m *Manager) transition(ctx context.Context, p auth.Principal, ref string, from provider.State, verb string,
	do func(provider.Provider, context.Context, provider.Sandbox) (provider.Sandbox, error)) (Sandbox, error) {
	sb, err := m.Get(ctx, p, ref)
	if err != nil {
		return view(sb), err
	}
	return m.transitionStored(ctx, sb, from, verb, do)
}

// transitionStored is transition on the stored sandbox sb, for whoever may.
func (m *Manager) transitionStored(ctx context.Context, sb store.Sandbox, from provider.State, verb string,
	do func(provider.Provider, context.Context, provider.Sandbox) (provider.Sandbox, error)) (Sandbox, error) {
	if sb.State != string(from) {
		return view(sb), fmt.Errorf("%w: sandbox %s is %s; only a %s sandbox can %s", ErrState, sb.Name, sb.State, from, verb)
	}
	prov, err := m.provider(sb)
	if err != nil {
		return view(sb), err
	}
	made, err := do(prov, ctx, providerView(sb))
	if err != nil {
		return view(sb), providerError(verb+" sandbox "+sb.Name, err)
	}
	sb = merge(sb, made, m.cfg.Clock.Now())
	return view(sb), m.save(context.WithoutCancel(ctx), sb)
}

// Reconcile asks each provider about every stored sandbox that should be alive, and records
// what it says: a daemon that died while hangar was down makes its sandbox failed, with why.
// It runs at start.
func (m *Manager) Reconcile(ctx context.Context) {
	sbs, err := m.cfg.Store.ListSandboxes(ctx, "")
	if err != nil {
		m.log.Error("reconcile sandboxes", "err", err)
		return
	}
	for _, sb := range sbs {
		if sb.State != string(provider.StateRunning) && sb.State != string(provider.StatePaused) && sb.State != string(provider.StateCreating) {
			continue
		}
		if _, ok := m.cfg.Providers[sb.Provider]; !ok {
			m.log.Warn("sandbox on a provider that is not set up; leaving it as it is", "sandbox", sb.Name, "provider", sb.Provider)
			continue
		}
		sb, err := m.recheck(ctx, sb)
		if err != nil {
			m.log.Warn("reconcile sandbox", "sandbox", sb.Name, "err", err)
			continue
		}
		m.log.Info("sandbox found again", "sandbox", sb.Name, "provider", sb.Provider, "state", sb.State, "reason", sb.Reason)
	}
}
