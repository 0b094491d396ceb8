package e2b

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the hangar binary built once for the package's tests: the fake's sandboxes run
// it as their envd.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

const testTimeout = 30 * time.Second

func newFake(t *testing.T) *fakeE2B {
	t.Helper()
	f := newFakeE2B(hangarBin, t.TempDir())
	t.Cleanup(f.close)
	t.Cleanup(func() {
		// A daemon call that broke (a stream's "unexpected EOF"): was it the daemon, or the
		// proxy? (Runs before close, while the daemons' logs are there.)
		if t.Failed() {
			f.report(t)
		}
	})
	return f
}

func newTestProvider(t *testing.T, f *fakeE2B, mod func(*Config)) *Provider {
	t.Helper()
	cfg := Config{APIKey: fakeAPIKey, APIURL: f.srv.URL, DaemonURL: f.daemonURL(), StartTimeout: testTimeout}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestSuite(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	providertest.Run(t, func(t *testing.T) provider.Provider {
		return newTestProvider(t, f, nil)
	}, providertest.Options{Daemon: true, NoExec: true})
}

func TestNewNeedsAPIKey(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without an API key succeeded")
	}
}

// TestCreateRequest: what the provider asks E2B for, and what it makes of the answer.
func TestCreateRequest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)
	p := newTestProvider(t, f, func(c *Config) { c.Instance = "blue"; c.Timeout = 90 * time.Second })
	sb, err := p.Create(ctx, provider.Spec{Name: "req", Owner: "alice", Env: map[string]string{"FOO": "bar"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	f.mu.Lock()
	got := f.sandboxes[sb.ID]
	f.mu.Unlock()
	if got == nil {
		t.Fatalf("the fake has no sandbox %s", sb.ID)
	}
	wantMeta := map[string]string{metaInstance: "blue", metaSandbox: "req", metaOwner: "alice", metaWorkdir: "/home/user"}
	for k, v := range wantMeta {
		if got.api.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, got.api.Metadata[k], v)
		}
	}
	if got.envVars["FOO"] != "bar" {
		t.Errorf("envVars %v, want FOO=bar", got.envVars)
	}
	if sb.Daemon == nil || sb.Daemon.AccessToken != got.api.EnvdAccessToken {
		t.Errorf("Daemon %+v, want E2B's envdAccessToken", sb.Daemon)
	}
	if want := f.srv.URL + "/sbx/" + sb.ID; sb.Daemon.URL != want {
		t.Errorf("Daemon URL %s, want %s", sb.Daemon.URL, want)
	}
	if sb.Data["domain"] != "fake.e2b.test" || sb.Data["template"] != "base" {
		t.Errorf("Data %v, want E2B's domain and the template", sb.Data)
	}
}

func TestDaemonURLPattern(t *testing.T) {
	t.Parallel()
	p, err := New(Config{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sb := p.sandbox(apiSandbox{SandboxID: "abc123", Metadata: map[string]string{metaSandbox: "x"}})
	if want := "https://49983-abc123.e2b.app"; sb.Daemon.URL != want {
		t.Errorf("default daemon URL %s, want %s", sb.Daemon.URL, want)
	}
	sb = p.sandbox(apiSandbox{SandboxID: "abc123", Domain: "eu.e2b.dev"})
	if want := "https://49983-abc123.eu.e2b.dev"; sb.Daemon.URL != want {
		t.Errorf("daemon URL with E2B's domain %s, want %s", sb.Daemon.URL, want)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)

	t.Run("unknown template", func(t *testing.T) {
		p := newTestProvider(t, f, nil)
		_, err := p.Create(ctx, provider.Spec{Name: "t", Template: "nope"})
		if !errors.Is(err, provider.ErrImageMissing) || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("Create with an unknown template: %v, want ErrImageMissing naming it", err)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		p := newTestProvider(t, f, func(c *Config) { c.APIKey = "wrong" })
		_, err := p.Create(ctx, provider.Spec{Name: "t"})
		if err == nil || !strings.Contains(err.Error(), "refused the API key") {
			t.Errorf("Create with a bad key: %v, want it to say so", err)
		}
	})
	t.Run("api down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		p := newTestProvider(t, f, func(c *Config) { c.APIURL = "http://" + addr })
		if _, err := p.Create(ctx, provider.Spec{Name: "t"}); !errors.Is(err, provider.ErrUnavailable) {
			t.Errorf("Create with E2B down: %v, want ErrUnavailable", err)
		}
		if _, err := p.List(ctx); !errors.Is(err, provider.ErrUnavailable) {
			t.Errorf("List with E2B down: %v, want ErrUnavailable", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusBadGateway, apiError{Code: 502, Message: "upstream broke"})
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Close()
		p := newTestProvider(t, f, func(c *Config) { c.APIURL = "http://" + ln.Addr().String() })
		_, err = p.Create(ctx, provider.Spec{Name: "t"})
		if !errors.Is(err, provider.ErrUnavailable) || !strings.Contains(err.Error(), "upstream broke") {
			t.Errorf("Create on a 502: %v, want ErrUnavailable with E2B's message", err)
		}
	})
}

// TestListPages: List follows X-Next-Token over several pages and keeps to its instance.
func TestListPages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)
	p := newTestProvider(t, f, nil)
	other := newTestProvider(t, f, func(c *Config) { c.Instance = "other" })
	want := map[string]bool{}
	for i := range 5 {
		sb, err := p.Create(ctx, provider.Spec{Name: fmt.Sprintf("page-%d", i)})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		want[sb.Name] = true
	}
	if _, err := other.Create(ctx, provider.Spec{Name: "theirs"}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]bool{}
	for _, sb := range list {
		got[sb.Name] = true
		if sb.Daemon == nil || sb.Daemon.AccessToken == "" || sb.State != provider.StateRunning {
			t.Errorf("listed %+v: want running with its token", sb)
		}
	}
	if len(got) != len(want) || !got["page-0"] || !got["page-4"] || got["theirs"] {
		t.Errorf("List found %v, want %v", got, want)
	}
	if n := f.count("GET /v2/sandboxes"); n < 3 {
		t.Errorf("List made %d page requests, want 3 or more (pages of 2)", n)
	}
}

// TestDeadDaemon: a sandbox E2B lists as running whose envd does not answer is failed.
func TestDeadDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)
	p := newTestProvider(t, f, nil)
	sb, err := p.Create(ctx, provider.Spec{Name: "dies"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	f.mu.Lock()
	fs := f.sandboxes[sb.ID]
	f.mu.Unlock()
	stop(fs)
	got, err := p.Get(ctx, sb)
	if err != nil || got.State != provider.StateFailed || !strings.Contains(got.Reason, "does not answer") {
		t.Errorf("Get = %s (%q), %v; want failed, envd not answering", got.State, got.Reason, err)
	}
}
