// Package local is the provider that makes a sandbox out of a folder on the control plane's own
// machine. It isolates nothing: a command in a local sandbox runs as the control plane's user
// with its whole file system and network. It is the default, for development and tests.
//
// Each sandbox is a folder <DataDir>/sandboxes/<name>/ holding sandbox.json (what the provider
// needs to find it again), envd.log (the daemon's output) and the workdir (work/ unless the spec
// names another folder inside). With a daemon, `hangar-envd envd` runs detached in its own session,
// so it outlives a control-plane restart.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/provider"
)

// Name is the provider's name in the API.
const Name = "local"

// Config configures the local provider.
type Config struct {
	// DataDir is the folder under which sandboxes live (in DataDir/sandboxes). Required: New
	// fails when it is empty.
	DataDir string
	// EnvdBinary is the hangar-envd executable run as the daemon (`hangar-envd envd`).
	// Empty: provider.DefaultEnvdBinary (hangar-envd beside this executable).
	EnvdBinary string
	// Env is the base environment (KEY=value) of the daemon and of every command, before the
	// spec's and the request's. Nil: PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	// and LANG=C.UTF-8. HOME is always the sandbox's folder. The control plane's own environment
	// is never passed on, so its secrets stay out of sandboxes.
	Env []string
	// StartTimeout bounds how long Create waits for the daemon to write its address and answer
	// /health. Zero: 15s.
	StartTimeout time.Duration
	// StopTimeout is how long Destroy waits for the daemon to exit after SIGTERM before it sends
	// SIGKILL. Zero: 5s.
	StopTimeout time.Duration
	// Logger receives the provider's log lines. Nil: discarded.
	Logger *slog.Logger
	// Clock times the waits for a new daemon, a stopped or a dead one, and stamps sandboxes.
	// Nil: the real clock.
	Clock quartz.Clock
}

// Provider is the local provider. It is safe for concurrent use.
type Provider struct {
	cfg    Config
	root   string // DataDir/sandboxes
	log    *slog.Logger
	health *http.Client

	// mu serialises changes to sandbox.json files, so Pause and Resume of one sandbox do not
	// interleave their writes.
	mu sync.Mutex
}

var _ provider.Provider = (*Provider)(nil)

// New returns a local provider over cfg.DataDir, creating its folder.
func New(cfg Config) (*Provider, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("new local provider: no data dir")
	}
	if cfg.EnvdBinary == "" {
		bin, _, err := provider.DefaultEnvdBinary()
		if err != nil {
			return nil, fmt.Errorf("new local provider: %w", err)
		}
		cfg.EnvdBinary = bin
	}
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 15 * time.Second
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	root := filepath.Join(cfg.DataDir, "sandboxes")
	// Its commands run as hangar's own user, so nobody else needs to enter it; an older one is
	// tightened too.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("make %s private: %w", root, err)
	}
	return &Provider{
		cfg:  cfg,
		root: root,
		log:  cfg.Logger.With("provider", Name),
		// /health is a local round trip; a daemon that takes longer is as good as dead.
		// No keep-alive: a check now and then needs no idle connection left behind.
		health: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}, nil
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// record is sandbox.json: everything needed to find a sandbox and its daemon again.
type record struct {
	Name    string            `json:"name"`
	Owner   string            `json:"owner,omitempty"`
	Workdir string            `json:"workdir"`
	Env     map[string]string `json:"env,omitempty"`
	Created time.Time         `json:"created"`
	Daemon  *daemonRecord     `json:"daemon,omitempty"`
	Paused  bool              `json:"paused,omitempty"`
	// Failed is why the sandbox is unusable since Create, when it is.
	Failed string `json:"failed,omitempty"`
}

type daemonRecord struct {
	PID int `json:"pid"`
	// StartTime is the process's start time in clock ticks since boot (/proc/pid/stat field
	// 22), so a recycled pid is never mistaken for the daemon.
	StartTime uint64 `json:"start_time"`
	// SID is the daemon's session (and process group) id: the daemon and everything it starts.
	SID     int    `json:"sid"`
	Address string `json:"address,omitempty"` // host:port
	Token   string `json:"token"`
}

const (
	recordFile  = "sandbox.json"
	logFile     = "envd.log"
	addressFile = "envd.addr"
	defaultWork = "work"
	turnsDir    = "turns" // the sandbox's turns' directories (Data["turns"])
)

// Create makes the sandbox's folder and, with spec.Daemon, starts its daemon and waits until it
// answers /health.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Sandbox, error) {
	if err := names.CheckSandbox(spec.Name); err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	dir := p.dir(spec.Name)
	workdir, err := workdirIn(dir, spec.Workdir)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	err = os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		if err = p.reclaim(dir, spec.Name); err == nil {
			err = os.Mkdir(dir, 0o755)
		}
	}
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	rec := &record{Name: spec.Name, Owner: spec.Owner, Workdir: workdir, Env: spec.Env, Created: p.cfg.Clock.Now().UTC()}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		_ = removeAll(dir)
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	p.log.Warn("local sandbox created: it isolates nothing, its commands run as this user on this machine",
		"sandbox", spec.Name, "folder", dir)
	if spec.Daemon {
		token, err := provider.NewAccessToken()
		if err != nil {
			_ = removeAll(dir)
			return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
		}
		rec.Daemon = &daemonRecord{Token: token}
		if err := p.startDaemon(ctx, dir, rec); err != nil {
			// The folder stays, with the daemon's log, so a person can see what went wrong;
			// Destroy removes it.
			rec.Failed = err.Error()
			p.log.Error("local sandbox daemon did not start", "sandbox", spec.Name, "err", err)
		}
	}
	if err := writeRecord(dir, rec); err != nil {
		p.killDaemon(rec)
		_ = removeAll(dir)
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	return p.sandbox(ctx, dir, rec), nil
}

// reclaim removes the folder dir that a sandbox named name left behind when it failed (from
// before hangar removed a failed sandbox's folder as its name was made again), or one with no
// record, which Create never finished. Any other is a sandbox's, and is left alone.
func (p *Provider) reclaim(dir, name string) error {
	rec, err := readRecord(dir)
	if err == nil && (rec.Failed == "" || rec.Daemon != nil && alive(rec.Daemon)) {
		return fmt.Errorf("sandbox %s's folder %s is there already, of a sandbox that did not fail", name, dir)
	}
	p.log.Warn("removing what an earlier local sandbox of this name left", "sandbox", name, "folder", dir)
	return removeAll(dir)
}

// startDaemon runs `hangar-envd envd` detached in its own session and waits for its address and a
// healthy /health. It fills in rec.Daemon.
func (p *Provider) startDaemon(ctx context.Context, dir string, rec *record) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	addrPath := filepath.Join(dir, addressFile)
	// sh starts the daemon in the background and exits at once, so the daemon is never a child
	// of the control plane (no zombie to reap, nothing tied to this process's life). Its output
	// goes to the log file, never to the control plane's streams.
	const script = `log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!`
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script, "hangar-local",
		filepath.Join(dir, logFile),
		p.cfg.EnvdBinary, "envd", "--listen", "127.0.0.1:0", "--address-file", addrPath, "--workdir", rec.Workdir)
	cmd.Dir = rec.Workdir
	// The token's hash, not the token: the daemon's environment is its own from the start
	// (and it is not dumpable, so other processes cannot read it), but no copy is better.
	cmd.Env = append(p.env(dir, rec.Env, nil), "HANGAR_ENVD_ACCESS_TOKEN_SHA256="+provider.DaemonTokenSHA256(rec.Daemon.Token))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return fmt.Errorf("start daemon: read its pid %q: %w", out, err)
	}
	rec.Daemon.PID = pid
	// sh led the new session: the session and process group ids are its pid, and stay so
	// after it exits.
	rec.Daemon.SID = cmd.Process.Pid
	st, err := procStat(pid)
	if err == nil {
		rec.Daemon.StartTime = st.startTime
	}

	if err := p.waitAddress(ctx, dir, rec); err != nil {
		return err
	}
	var exited error
	err = provider.WaitHealthy(ctx, p.health, "http://"+rec.Daemon.Address, envd.Wait{Timeout: p.cfg.StartTimeout,
		Every: 20 * time.Millisecond, Clock: p.cfg.Clock, Gone: func(context.Context) error {
			if !alive(rec.Daemon) {
				exited = fmt.Errorf("daemon exited at start: %s", tailOf(filepath.Join(dir, logFile)))
			}
			return exited
		}})
	if err != nil && exited == nil {
		return fmt.Errorf("daemon at %s did not answer /health in %s", rec.Daemon.Address, p.cfg.StartTimeout)
	}
	return err
}

// waitAddress waits for the just-started daemon to write its address (rec.Daemon.Address).
func (p *Provider) waitAddress(ctx context.Context, dir string, rec *record) error {
	for {
		if addr, err := readAddress(filepath.Join(dir, addressFile)); err == nil {
			rec.Daemon.Address = addr
			return nil
		}
		if !alive(rec.Daemon) {
			return fmt.Errorf("daemon exited at start: %s", tailOf(filepath.Join(dir, logFile)))
		}
		t := p.cfg.Clock.NewTimer(20*time.Millisecond, "local", "address")
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("daemon wrote no address in %s: %s", p.cfg.StartTimeout, tailOf(filepath.Join(dir, logFile)))
		case <-t.C:
		}
	}
}

// readAddress reads the daemon's address file: host:port, possibly as a URL.
func readAddress(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	addr := strings.TrimSpace(string(b))
	addr = strings.TrimPrefix(addr, "http://")
	if addr == "" {
		return "", errors.New("empty address file")
	}
	return addr, nil
}

// Get reads the sandbox's folder and checks its daemon: alive, and answering /health unless
// paused.
func (p *Provider) Get(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	dir := p.dir(sb.Name)
	rec, err := readRecord(dir)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("get sandbox %s: %w", sb.Name, err)
	}
	return p.sandbox(ctx, dir, rec), nil
}

// List returns every sandbox with a folder under the data dir.
func (p *Provider) List(ctx context.Context) ([]provider.Sandbox, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var out []provider.Sandbox
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(p.root, e.Name())
		rec, err := readRecord(dir)
		if err != nil {
			p.log.Warn("skip folder that is no sandbox", "folder", dir, "err", err)
			continue
		}
		out = append(out, p.sandbox(ctx, dir, rec))
	}
	return out, nil
}

// Destroy stops the daemon's session (SIGTERM, then SIGKILL after StopTimeout) and removes the
// folder.
func (p *Provider) Destroy(ctx context.Context, sb provider.Sandbox) error {
	dir := p.dir(sb.Name)
	rec, err := readRecord(dir)
	if err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	sid := 0
	if rec.Daemon != nil && alive(rec.Daemon) {
		sid = rec.Daemon.SID
		// A paused daemon handles SIGTERM only once it runs again.
		signalSession(sid, syscall.SIGTERM, syscall.SIGCONT)
		if !waitDead(ctx, p.cfg.Clock, rec.Daemon, p.cfg.StopTimeout) {
			p.log.Warn("daemon ignored SIGTERM, killing it", "sandbox", sb.Name, "pid", rec.Daemon.PID)
		}
	}
	// Kill whatever is left in the session, the daemon included if it is still there, and what
	// left the session: a turn's harness setsids away from the daemon, and an agent may detach
	// its children again.
	killInside(ctx, p.cfg.Clock, dir, sid)
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	return nil
}

// killDaemon sends SIGKILL to the daemon's session.
func (p *Provider) killDaemon(rec *record) {
	if rec.Daemon == nil || rec.Daemon.SID == 0 {
		return
	}
	signalSession(rec.Daemon.SID, syscall.SIGKILL)
}

// Pause stops (SIGSTOP) every process of the daemon's session. A sandbox without a daemon has
// nothing running between commands: pausing it only records the state.
func (p *Provider) Pause(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return p.setPaused(ctx, sb, true)
}

// Resume continues (SIGCONT) every process of the daemon's session.
func (p *Provider) Resume(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	return p.setPaused(ctx, sb, false)
}

func (p *Provider) setPaused(ctx context.Context, sb provider.Sandbox, paused bool) (provider.Sandbox, error) {
	verb := "resume"
	sig := syscall.SIGCONT
	if paused {
		verb, sig = "pause", syscall.SIGSTOP
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dir := p.dir(sb.Name)
	rec, err := readRecord(dir)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("%s sandbox %s: %w", verb, sb.Name, err)
	}
	if rec.Failed != "" {
		return provider.Sandbox{}, fmt.Errorf("%s sandbox %s: it failed: %s", verb, sb.Name, rec.Failed)
	}
	if rec.Daemon != nil {
		if !alive(rec.Daemon) {
			return provider.Sandbox{}, fmt.Errorf("%s sandbox %s: its daemon (pid %d) is gone", verb, sb.Name, rec.Daemon.PID)
		}
		signalSession(rec.Daemon.SID, sig)
	}
	rec.Paused = paused
	if err := writeRecord(dir, rec); err != nil {
		return provider.Sandbox{}, fmt.Errorf("%s sandbox %s: %w", verb, sb.Name, err)
	}
	if paused && rec.Daemon != nil {
		// SIGCONT takes effect as it is sent; SIGSTOP only when each thread next runs.
		if err := waitStopped(ctx, p.cfg.Clock, rec.Daemon.SID); err != nil {
			return provider.Sandbox{}, fmt.Errorf("%s sandbox %s: %w", verb, sb.Name, err)
		}
	}
	return p.sandbox(ctx, dir, rec), nil
}

// Exec runs req.Command with `bash -lc` (or `sh -c`) in the sandbox's folder, as the control
// plane's user: the local provider isolates nothing. A paused sandbox refuses.
func (p *Provider) Exec(ctx context.Context, sb provider.Sandbox, req provider.ExecRequest) (provider.ExecResult, error) {
	dir := p.dir(sb.Name)
	rec, err := readRecord(dir)
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
	if rec.Paused {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: it is paused", sb.Name)
	}
	cwd := rec.Workdir
	if req.Cwd != "" {
		cwd = req.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(rec.Workdir, cwd)
		}
	}
	return runCommand(ctx, req, cwd, p.env(dir, rec.Env, req.Env))
}

// env is the environment of a command: the base, HOME, the spec's, then the request's.
func (p *Provider) env(dir string, spec, req map[string]string) []string {
	env := slices.Clone(p.cfg.Env)
	env = append(env, "HOME="+dir, markerEnv+"="+dir)
	for _, m := range []map[string]string{spec, req} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			env = append(env, k+"="+m[k])
		}
	}
	return env
}

// sandbox is the provider's view of a sandbox as it is now.
func (p *Provider) sandbox(ctx context.Context, dir string, rec *record) provider.Sandbox {
	sb := provider.Sandbox{
		Name:     rec.Name,
		Provider: Name,
		ID:       dir,
		State:    provider.StateRunning,
		Workdir:  rec.Workdir,
		// turns: where its turns' directories go (turns' Config.RunRoot aside), in the folder:
		// one tree per hangar (data dir) and sandbox, which no other hangar on the machine
		// sees, made 0700 by hangar-envd turn-dir.
		Data: map[string]string{"folder": dir, "turns": filepath.Join(dir, turnsDir)},
	}
	if rec.Paused {
		sb.State = provider.StatePaused
	}
	if d := rec.Daemon; d != nil {
		sb.Data["pid"] = strconv.Itoa(d.PID)
		sb.Data["sid"] = strconv.Itoa(d.SID)
		if d.Address != "" {
			sb.Daemon = &provider.Daemon{URL: "http://" + d.Address, AccessToken: d.Token}
		}
	}
	switch {
	case rec.Failed != "":
		sb.State, sb.Reason = provider.StateFailed, rec.Failed
	case rec.Daemon == nil:
	case !alive(rec.Daemon):
		sb.State = provider.StateFailed
		sb.Reason = fmt.Sprintf("the sandbox's daemon (pid %d) is no longer running; its log is %s", rec.Daemon.PID, filepath.Join(dir, logFile))
	case rec.Paused:
		// A stopped daemon cannot answer /health.
	default:
		if err := provider.Healthy(ctx, p.health, "http://"+rec.Daemon.Address); err != nil {
			sb.State = provider.StateFailed
			sb.Reason = fmt.Sprintf("the sandbox's daemon (pid %d) does not answer at %s: %v", rec.Daemon.PID, rec.Daemon.Address, err)
		}
	}
	return sb
}

func (p *Provider) dir(name string) string {
	// A name that is not a DNS label never reaches the file system: it could hold "../".
	if names.CheckSandbox(name) != nil {
		return filepath.Join(p.root, "invalid-name")
	}
	return filepath.Join(p.root, name)
}

// CheckSpec refuses a workdir that is the sandbox's folder itself ("/", ".", "..", "/../.."):
// the folder holds the daemon's record and log, which the sandbox's commands must not own.
func (p *Provider) CheckSpec(spec provider.Spec) error {
	_, err := workdirIn(p.dir(spec.Name), spec.Workdir)
	return err
}

// workdirIn resolves the spec's workdir inside the sandbox's folder: empty means work/, a
// relative or absolute path is taken as relative to the folder and must stay inside it.
func workdirIn(dir, workdir string) (string, error) {
	if workdir == "" {
		return filepath.Join(dir, defaultWork), nil
	}
	rel := filepath.Clean("/" + workdir)[1:]
	if rel == "" {
		return "", fmt.Errorf("workdir %q names the sandbox's folder itself, which cannot be its workdir: give a folder inside it, such as \"work\" or \"/src\"", workdir)
	}
	if rel == turnsDir || strings.HasPrefix(rel, turnsDir+"/") {
		return "", fmt.Errorf("workdir %q is where the sandbox's turns keep their files, which cannot be its workdir: give another folder, such as \"work\" or \"/src\"", workdir)
	}
	return filepath.Join(dir, rel), nil
}

func readRecord(dir string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, provider.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", recordFile, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("read %s: %w", recordFile, err)
	}
	return &rec, nil
}

// writeRecord replaces sandbox.json atomically. It holds the daemon's token: only the owner may
// read it.
func writeRecord(dir string, rec *record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", recordFile, err)
	}
	tmp := filepath.Join(dir, recordFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", recordFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("write %s: %w", recordFile, err)
	}
	return nil
}

// removeAll removes a sandbox's folder, making read-only folders inside writable first if it
// must (a Go module cache, for one, is read-only).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// tailOf returns the last lines of a log file, for an error message.
func tailOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log: " + err.Error()
	}
	const max = 1024
	if len(b) > max {
		b = b[len(b)-max:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "its log " + path + " is empty"
	}
	return "its log ends: " + s
}
