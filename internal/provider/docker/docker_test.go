package docker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the static hangar binary built once for the package's tests.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }

const testTimeout = 2 * time.Minute

// newProvider returns a provider over the local engine whose containers carry instance, closed
// when the test ends. It skips the test when no engine answers (fails under CI).
func newProvider(t *testing.T, instance string, mod func(*Config)) *Provider {
	t.Helper()
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	img, err := dockertest.EnsureImage(ctx, cli)
	if err != nil {
		t.Fatalf("make test image: %v", err)
	}
	cfg := Config{Image: img, EnvdBinary: hangarBin, Instance: instance}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestSuite(t *testing.T) {
	t.Parallel()
	instance := providertest.UniqueName("test")
	providertest.Run(t, func(t *testing.T) provider.Provider {
		return newProvider(t, instance, nil)
	}, providertest.Options{Daemon: true, NoDaemon: true})
}

// TestSuiteWithoutBash runs the suite on an image that has no bash: commands go through sh -c.
func TestSuiteWithoutBash(t *testing.T) {
	t.Parallel()
	instance := providertest.UniqueName("test")
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	img, err := dockertest.EnsureBusyboxImage(ctx, cli)
	if err != nil {
		t.Fatalf("make test image: %v", err)
	}
	providertest.Run(t, func(t *testing.T) provider.Provider {
		return newProvider(t, instance, func(c *Config) { c.Image = img })
	}, providertest.Options{Daemon: true, NoDaemon: true})
}

// TestShell: bash runs commands where the image has it, sh where it has not.
func TestShell(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	busybox, err := dockertest.EnsureBusyboxImage(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, providertest.UniqueName("test"), nil)
	tests := []struct {
		image, want string
	}{
		{dockertest.BashImage, "bash"},
		{busybox, "sh"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("shell"), Image: tc.image})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			defer p.Destroy(ctx, sb)
			res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: `if [ -n "$BASH_VERSION" ]; then echo bash; else echo sh; fi`})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			if got := strings.TrimSpace(string(res.Stdout)); got != tc.want {
				t.Errorf("in %s the command ran under %q, want %q", tc.image, got, tc.want)
			}
		})
	}
}

// TestDaemonContainer checks what the daemon's container is made of: the binary mounted
// read-only, the port published on 127.0.0.1 only, the token given through /init: not in argv,
// nor in any process's environment.
func TestDaemonContainer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("daemon"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateRunning {
		t.Fatalf("Create: %s (%s)", sb.State, sb.Reason)
	}
	info, err := p.cli.ContainerInspect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	for port, bindings := range info.HostConfig.PortBindings {
		for _, b := range bindings {
			if b.HostIP != "127.0.0.1" {
				t.Errorf("port %s published on %q, want 127.0.0.1 only", port, b.HostIP)
			}
		}
	}
	var mounted bool
	for _, m := range info.Mounts {
		if m.Destination == EnvdPath {
			mounted = true
			if m.RW {
				t.Errorf("%s is mounted read-write", EnvdPath)
			}
		}
	}
	if !mounted {
		t.Errorf("%s is not mounted: %+v", EnvdPath, info.Mounts)
	}
	argv := info.Path + " " + strings.Join(info.Args, " ")
	// The daemon, with nothing of the image's CMD after it, under docker's init.
	if want := EnvdPath + " envd --listen 0.0.0.0:49983 --workdir /workspace --access-token-sha256 " + provider.DaemonTokenSHA256(sb.Daemon.AccessToken); argv != want {
		t.Errorf("container runs %q, want %q", argv, want)
	}
	if info.HostConfig.Init == nil || !*info.HostConfig.Init {
		t.Error("the container runs without docker's init")
	}
	if strings.Contains(argv, sb.Daemon.AccessToken) {
		t.Errorf("the token is in the daemon's argv: %s %q", info.Path, info.Args)
	}
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: `echo "token=$HANGAR_ENVD_ACCESS_TOKEN"`})
	if err != nil || string(res.Stdout) != "token=\n" {
		t.Errorf("a command sees the daemon's token: %q, %v", res.Stdout, err)
	}
	// Nor in any process's environment: the daemon has only its hash.
	res, err = p.Exec(ctx, sb, provider.ExecRequest{Command: `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; echo end`})
	if err != nil || !strings.Contains(string(res.Stdout), "end") || strings.Contains(string(res.Stdout), sb.Daemon.AccessToken) {
		t.Errorf("a command reads the daemon's token in /proc/*/environ (or could not look): %q, %v", res.Stdout, err)
	}
	// And the daemon needs it.
	if has, err := provider.DaemonHasToken(ctx, http.DefaultClient, sb.Daemon.URL); err != nil || !has {
		t.Errorf("the daemon takes requests without its token: %v %v", has, err)
	}
	// Also from the moment its container is restarted outside hangar, before hangar has looked:
	// the daemon's port is reachable from every container on the bridge, not only the host.
	if err := p.cli.ContainerRestart(ctx, sb.ID, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err = p.cli.ContainerInspect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	url := p.sandbox(info).Daemon.URL // the engine may publish it on another port
	if err := p.waitHealthy(ctx, sb.ID, url); err != nil {
		t.Fatal(err)
	}
	if has, err := provider.DaemonHasToken(ctx, http.DefaultClient, url); err != nil || !has {
		t.Errorf("after a restart the daemon takes requests without its token: %v %v", has, err)
	}
}

func TestImageMissing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	_, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("noimage"), Image: "hangar-test:no-such-image"})
	if !errors.Is(err, provider.ErrImageMissing) {
		t.Fatalf("Create with a missing image: %v, want ErrImageMissing", err)
	}
	for _, want := range []string{"hangar-test:no-such-image", "docker pull hangar-test:no-such-image", "docker load"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestEngineDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p, err := New(Config{Host: "unix://" + t.TempDir() + "/no-engine.sock", EnvdBinary: hangarBin})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Create(ctx, provider.Spec{Name: "down"}); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("Create with no engine: %v, want ErrUnavailable", err)
	}
	if _, err := p.List(ctx); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("List with no engine: %v, want ErrUnavailable", err)
	}
	if _, err := p.Get(ctx, provider.Sandbox{Name: "down", ID: "x"}); !errors.Is(err, provider.ErrUnavailable) {
		t.Errorf("Get with no engine: %v, want ErrUnavailable", err)
	}
}

// TestHarnessWithoutDaemon: a container without a daemon has hangar-envd mounted too, so a
// turn's harness can run in it.
func TestHarnessWithoutDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("plain"), Daemon: false})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: EnvdPath + " harness --help"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "--run-log") {
		t.Fatalf("%s harness --help in a container without a daemon: exit %d, %q %q, %v", EnvdPath, res.ExitCode, res.Stdout, res.Stderr, err)
	}
}

// TestDaemonUnreachable: a container whose daemon never answers comes back failed, with a
// reason that quotes its output.
func TestDaemonUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// busybox has no "envd" applet: the "daemon" exits at once with a message.
	p := newProvider(t, providertest.UniqueName("test"), func(c *Config) { c.EnvdBinary = "/bin/busybox" })
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("nodaemon"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateFailed {
		t.Fatalf("Create: %s, want failed", sb.State)
	}
	// Whether the engine reports the exit before or after the first /health, the reason says
	// the daemon's container exited, and quotes its output.
	for _, want := range []string{"daemon", "exited (exit code 127)", "applet not found"} {
		if !strings.Contains(sb.Reason, want) {
			t.Errorf("Reason = %q, want it to say %q", sb.Reason, want)
		}
	}
	got, err := p.Get(ctx, sb)
	if err != nil || got.State != provider.StateFailed {
		t.Errorf("Get = %s, %v; want failed", got.State, err)
	}
}

// TestOtherInstance: a provider sees only its own instance's containers.
func TestOtherInstance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	other := newProvider(t, providertest.UniqueName("test"), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("mine")})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	list, err := other.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == sb.ID {
			t.Errorf("another instance lists %s", sb.Name)
		}
	}
	if err := other.Destroy(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("another instance's Destroy: %v, want ErrNotFound", err)
	}
}
