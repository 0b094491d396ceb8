// Package providertest is the test suite every provider passes where it applies: create, exec
// through the provider's own exec, pause and resume, destroy, finding a sandbox again after a
// restart, and a daemon that answers /health and authenticated requests.
package providertest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
)

// Fixed timeouts of the suite's steps: generous, since the machine may be busy; a step that
// passes them has failed.
const (
	createTimeout = 2 * time.Minute
	stepTimeout   = 30 * time.Second
	pollTimeout   = 20 * time.Second
)

// Options says what a provider can do and how to make its sandboxes.
type Options struct {
	// Spec adjusts a spec before Create (an image, a template). Nil: the spec as it is.
	Spec func(spec *provider.Spec)
	// Daemon runs the cases with a daemon in the sandbox; NoDaemon the cases without.
	Daemon, NoDaemon bool
	// NoExec means the provider's Exec returns provider.ErrUnsupported (e2b).
	NoExec bool
	// NoPause means Pause and Resume return provider.ErrUnsupported.
	NoPause bool
	// NoPauseWithoutDaemon means a sandbox without a daemon cannot be paused (ErrUnsupported).
	NoPauseWithoutDaemon bool
	// DaemonURLPerProvider means each provider value reaches a daemon at a URL of its own (a
	// port-forward from a local port): after a restart only the token must be the same, and
	// the daemon must answer at the new URL.
	DaemonURLPerProvider bool
	// ExecTimeout is the timeout of the exec case that times out, which must let its command
	// start and print first. Zero: 500ms. A provider whose exec takes long to start gives
	// more (pods/exec goes through the API server, the kubelet and the runtime: on a loaded
	// test machine over 500ms).
	ExecTimeout time.Duration
}

// Run runs the suite, its cases in parallel (each makes sandboxes of its own names).
// newProvider returns a new provider value over the same backing state (data
// dir, engine, API) each time it is called: the second call stands for a restarted control plane.
func Run(t *testing.T, newProvider func(t *testing.T) provider.Provider, opts Options) {
	t.Helper()
	if opts.Daemon {
		t.Run("daemon", func(t *testing.T) {
			t.Parallel()
			lifecycle(t, newProvider, opts, true)
		})
	}
	if opts.NoDaemon {
		t.Run("no-daemon", func(t *testing.T) {
			t.Parallel()
			lifecycle(t, newProvider, opts, false)
		})
	}
	t.Run("bad-name", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		p := newProvider(t)
		spec := provider.Spec{Name: "../Bad_Name"}
		if opts.Spec != nil {
			opts.Spec(&spec)
		}
		if sb, err := p.Create(ctx, spec); err == nil {
			_ = p.Destroy(ctx, sb)
			t.Fatalf("Create(%q) made a sandbox, want an error", spec.Name)
		}
	})
	t.Run("destroy-unknown", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		p := newProvider(t)
		sb := provider.Sandbox{Name: UniqueName("gone"), Provider: p.Name(), ID: "no-such-id"}
		if _, err := p.Get(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("Get(unknown sandbox) error = %v, want ErrNotFound", err)
		}
		if err := p.Destroy(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("Destroy(unknown sandbox) error = %v, want ErrNotFound", err)
		}
	})
}

// UniqueName returns a sandbox name that no other test run uses.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func lifecycle(t *testing.T, newProvider func(t *testing.T) provider.Provider, opts Options, daemon bool) {
	p := newProvider(t)
	spec := provider.Spec{
		Name:   UniqueName("pt"),
		Owner:  "alice",
		Env:    map[string]string{"HANGAR_TEST_SPEC": "from-spec"},
		Daemon: daemon,
	}
	if opts.Spec != nil {
		opts.Spec(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		if err := p.Destroy(ctx, sb); err != nil && !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("Destroy at cleanup: %v", err)
		}
	})
	if sb.State != provider.StateRunning {
		t.Fatalf("Create: state %s (%s), want running", sb.State, sb.Reason)
	}
	if sb.Name != spec.Name || sb.Provider != p.Name() || sb.ID == "" || sb.Workdir == "" {
		t.Errorf("Create returned %+v: want its name, provider, an id and a workdir", sb)
	}
	if daemon != (sb.Daemon != nil) {
		t.Fatalf("Create with Daemon=%v returned Daemon %+v", daemon, sb.Daemon)
	}
	if daemon {
		checkDaemon(t, sb)
	}

	if opts.NoExec {
		_, err := p.Exec(ctx, sb, provider.ExecRequest{Command: "true"})
		if !errors.Is(err, provider.ErrUnsupported) {
			t.Errorf("Exec error = %v, want ErrUnsupported", err)
		}
	} else {
		t.Run("exec", func(t *testing.T) { checkExec(t, p, sb, cmp.Or(opts.ExecTimeout, 500*time.Millisecond)) })
	}

	pausable := !opts.NoPause && (daemon || !opts.NoPauseWithoutDaemon)
	t.Run("pause-resume", func(t *testing.T) { checkPauseResume(t, p, &sb, opts, daemon, pausable) })

	t.Run("restart", func(t *testing.T) { checkRestart(t, newProvider, sb, opts, daemon) })

	t.Run("destroy", func(t *testing.T) { checkDestroy(t, p, sb, daemon) })
}

// checkPauseResume pauses and resumes *sb (or checks the provider cannot, when !pausable); *sb
// becomes the resumed sandbox.
func checkPauseResume(t *testing.T, p provider.Provider, sb *provider.Sandbox, opts Options, daemon, pausable bool) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	paused, err := p.Pause(ctx, *sb)
	if !pausable {
		if !errors.Is(err, provider.ErrUnsupported) {
			t.Fatalf("Pause error = %v, want ErrUnsupported", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if paused.State != provider.StatePaused {
		t.Errorf("Pause: state %s (%s), want paused", paused.State, paused.Reason)
	}
	if got, err := p.Get(ctx, *sb); err != nil || got.State != provider.StatePaused {
		t.Errorf("Get after Pause = %s (%s), %v; want paused", got.State, got.Reason, err)
	}
	resumed, err := p.Resume(ctx, paused)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if resumed.State != provider.StateRunning {
		t.Errorf("Resume: state %s (%s), want running", resumed.State, resumed.Reason)
	}
	*sb = resumed
	if daemon {
		checkDaemon(t, *sb)
	}
	if !opts.NoExec {
		res, err := p.Exec(ctx, *sb, provider.ExecRequest{Command: "echo back"})
		if err != nil || string(res.Stdout) != "back\n" {
			t.Errorf("Exec after Resume = %q, %v; want \"back\\n\"", res.Stdout, err)
		}
	}
}

// checkRestart finds sb again from a new provider value, as a restarted control plane would.
func checkRestart(t *testing.T, newProvider func(t *testing.T) provider.Provider, sb provider.Sandbox, opts Options, daemon bool) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	p2 := newProvider(t)
	list, err := p2.List(ctx)
	if err != nil {
		t.Fatalf("List after restart: %v", err)
	}
	i := slices.IndexFunc(list, func(s provider.Sandbox) bool { return s.Name == sb.Name })
	if i < 0 {
		t.Fatalf("List after restart: %s missing from %d sandboxes", sb.Name, len(list))
	}
	if list[i].ID != sb.ID || list[i].State != provider.StateRunning {
		t.Errorf("List after restart: %+v, want id %s, running", list[i], sb.ID)
	}
	switch {
	case !daemon:
	case list[i].Daemon == nil:
		t.Errorf("List after restart: no daemon, want %+v", sb.Daemon)
	case opts.DaemonURLPerProvider && list[i].Daemon.AccessToken != sb.Daemon.AccessToken:
		t.Errorf("List after restart: daemon token %q, want %q", list[i].Daemon.AccessToken, sb.Daemon.AccessToken)
	case !opts.DaemonURLPerProvider && *list[i].Daemon != *sb.Daemon:
		t.Errorf("List after restart: daemon %+v, want %+v", list[i].Daemon, sb.Daemon)
	}
	got, err := p2.Get(ctx, sb)
	if err != nil || got.State != provider.StateRunning {
		t.Fatalf("Get after restart = %s (%s), %v; want running", got.State, got.Reason, err)
	}
	if daemon {
		checkDaemon(t, got)
	}
	if !opts.NoExec {
		res, err := p2.Exec(ctx, got, provider.ExecRequest{Command: "echo $HANGAR_TEST_SPEC"})
		if err != nil || string(res.Stdout) != "from-spec\n" {
			t.Errorf("Exec after restart = %q, %v; want \"from-spec\\n\"", res.Stdout, err)
		}
	}
}

// checkDestroy destroys sb and checks nothing of it is left, its daemon included.
func checkDestroy(t *testing.T, p provider.Provider, sb provider.Sandbox, daemon bool) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := p.Destroy(ctx, sb); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if got, err := p.Get(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Get after Destroy = %s, %v; want ErrNotFound", got.State, err)
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatalf("List after Destroy: %v", err)
	}
	if slices.ContainsFunc(list, func(s provider.Sandbox) bool { return s.Name == sb.Name }) {
		t.Errorf("List after Destroy still has %s", sb.Name)
	}
	if daemon {
		// The daemon is gone with its sandbox.
		if answers(ctx, sb.Daemon.URL) {
			t.Errorf("GET %s/health still answers after Destroy", sb.Daemon.URL)
		}
	}
}

func checkExec(t *testing.T, p provider.Provider, sb provider.Sandbox, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	tests := []struct {
		name       string
		req        provider.ExecRequest
		stdout     string
		stderr     string
		exit       int
		timedOut   bool
		stdoutSize int // when not zero: the length of stdout, instead of its text
	}{
		{name: "streams and exit code", req: provider.ExecRequest{Command: "echo out; echo err >&2; exit 3"},
			stdout: "out\n", stderr: "err\n", exit: 3},
		{name: "env from spec and request", req: provider.ExecRequest{Command: `printf '%s %s' "$HANGAR_TEST_SPEC" "$HANGAR_TEST_REQ"`,
			Env: map[string]string{"HANGAR_TEST_REQ": "from-request"}}, stdout: "from-spec from-request"},
		{name: "workdir", req: provider.ExecRequest{Command: "pwd"}, stdout: sb.Workdir + "\n"},
		{name: "cwd", req: provider.ExecRequest{Command: "mkdir -p sub && cd sub && pwd"}, stdout: sb.Workdir + "/sub\n"},
		{name: "quoting", req: provider.ExecRequest{Command: `echo "a  b" 'c"d' $((1+2))`}, stdout: "a  b c\"d 3\n"},
		{name: "output tail", req: provider.ExecRequest{Command: "head -c 300000 /dev/zero | tr '\\0' a; echo end"},
			stdoutSize: provider.MaxExecOutput},
		{name: "timeout", req: provider.ExecRequest{Command: "echo started; sleep 61; echo late", Timeout: timeout},
			stdout: "started\n", timedOut: true, exit: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Exec(ctx, sb, tc.req)
			if err != nil {
				t.Fatalf("Exec(%q): %v", tc.req.Command, err)
			}
			if tc.stdoutSize != 0 {
				if len(res.Stdout) != tc.stdoutSize || !bytes.HasSuffix(res.Stdout, []byte("aaaend\n")) {
					t.Errorf("Exec(%q): %d bytes of stdout ending %q, want the last %d", tc.req.Command,
						len(res.Stdout), res.Stdout[max(0, len(res.Stdout)-8):], tc.stdoutSize)
				}
			} else if string(res.Stdout) != tc.stdout {
				t.Errorf("Exec(%q): stdout %q, want %q", tc.req.Command, res.Stdout, tc.stdout)
			}
			if string(res.Stderr) != tc.stderr {
				t.Errorf("Exec(%q): stderr %q, want %q", tc.req.Command, res.Stderr, tc.stderr)
			}
			if res.TimedOut != tc.timedOut {
				t.Errorf("Exec(%q): TimedOut %v, want %v", tc.req.Command, res.TimedOut, tc.timedOut)
			}
			if tc.exit >= 0 && res.ExitCode != tc.exit {
				t.Errorf("Exec(%q): exit code %d, want %d", tc.req.Command, res.ExitCode, tc.exit)
			}
		})
	}
	t.Run("timeout kills the command", func(t *testing.T) {
		// No process of the timed-out command (its "sleep 61") may survive it.
		const count = `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done 2>/dev/null | grep -c '^sleep 61' || true`
		var last string
		for {
			res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: count})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if last = strings.TrimSpace(string(res.Stdout)); last == "0" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s processes of the timed-out command still run", last)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	t.Run("relative cwd", func(t *testing.T) {
		res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: "pwd", Cwd: "sub"})
		if err != nil || string(res.Stdout) != sb.Workdir+"/sub\n" {
			t.Errorf("Exec(pwd, Cwd sub) = %q, %v; want %q", res.Stdout, err, sb.Workdir+"/sub\n")
		}
	})
}

// client has no keep-alive, so no idle connection outlives a test (goleak).
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// checkDaemon proves the sandbox's daemon is up and reachable: /health answers 204 without a
// token, and an authenticated request (process.Process/List over Connect's JSON codec) is
// refused without the token and answered with it.
func checkDaemon(t *testing.T, sb provider.Sandbox) {
	t.Helper()
	if sb.Daemon == nil || sb.Daemon.URL == "" {
		t.Fatalf("sandbox %s has no daemon URL", sb.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	if err := health(ctx, sb.Daemon.URL); err != nil {
		t.Fatalf("daemon of %s: %v", sb.Name, err)
	}
	if sb.Daemon.AccessToken == "" {
		t.Fatalf("daemon of %s has no access token", sb.Name)
	}
	if code, body := listProcesses(ctx, t, sb.Daemon.URL, ""); code != http.StatusUnauthorized {
		t.Errorf("process.Process/List without a token: %d %s, want 401", code, body)
	}
	if code, body := listProcesses(ctx, t, sb.Daemon.URL, "wrong"+sb.Daemon.AccessToken); code != http.StatusUnauthorized {
		t.Errorf("process.Process/List with a wrong token: %d %s, want 401", code, body)
	}
	if code, body := listProcesses(ctx, t, sb.Daemon.URL, sb.Daemon.AccessToken); code != http.StatusOK {
		t.Errorf("process.Process/List with the token: %d %s, want 200", code, body)
	}
}

// health polls GET url/health until it answers 204 or ctx ends.
func health(ctx context.Context, url string) error {
	for {
		err := healthOnce(ctx, url)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers reports whether the daemon at url still answers GET /health. It first dials with
// ctx's deadline, which a dial abandoned by ctx honours: the HTTP client's own dial would
// outlive a request cancelled while connecting to a gone address (a deleted pod's IP: no ARP
// answer for seconds), and leak its goroutine past the test.
func answers(ctx context.Context, url string) bool {
	if host, ok := strings.CutPrefix(url, "http://"); ok {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
		if err != nil {
			return false
		}
		conn.Close()
	}
	return healthOnce(ctx, url) == nil
}

// healthOnce asks GET url/health once and wants 204.
func healthOnce(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return errors.New("GET /health: " + resp.Status + ", want 204")
	}
	return nil
}

func listProcesses(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/process.Process/List", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(body)
}
