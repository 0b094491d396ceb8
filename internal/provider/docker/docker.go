// Package docker is the provider that runs each sandbox as a container on a Docker engine,
// through the engine API. hangar-envd is bind-mounted read-only into every container at
// /opt/hangar/bin/hangar-envd (the turn harness runs from it). With a daemon the container runs
// `hangar-envd envd`, its port published on 127.0.0.1 only; without one, the container idles
// under /bin/sh and every command goes through `docker exec`, so any image with /bin/sh will do.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coder/quartz"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/provider"
)

// Name is the provider's name in the API.
const Name = "docker"

// DaemonPort is the port `hangar-envd envd` listens on inside a container, E2B's envd port.
const DaemonPort = 49983

// EnvdPath is where hangar-envd is mounted in every container: the daemon, and the turn
// harness (`hangar-envd harness`).
const EnvdPath = "/opt/hangar/bin/hangar-envd"

// Labels on every container the provider makes; List finds them by labelInstance.
const (
	labelInstance = "dev.hangar.instance"
	labelSandbox  = "dev.hangar.sandbox"
	labelOwner    = "dev.hangar.owner"
	labelDaemon   = "dev.hangar.daemon"
	labelWorkdir  = "dev.hangar.workdir"
	// labelToken keeps the daemon's access token on the host, so List finds it again; a label
	// is not visible inside the container.
	labelToken = "dev.hangar.daemon-token"
)

// tokenEnv carried the daemon's access token into containers made by earlier versions; the
// daemon now gets only the token's hash (see containerConfig), and tokenEnv is only read back
// from old containers.
const tokenEnv = "HANGAR_ENVD_ACCESS_TOKEN"

// idleScript keeps a container without a daemon alive with nothing but /bin/sh and sleep, and
// lets it stop at once on SIGTERM.
const idleScript = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// Config configures the docker provider.
type Config struct {
	// Host is the engine's address, e.g. unix:///var/run/docker.sock or tcp://host:2376. Empty:
	// unix:///var/run/docker.sock. The daemon's port is published on the engine host's
	// 127.0.0.1, so a daemon is only reachable when the engine runs on this machine.
	Host string
	// Image is the image of a sandbox whose spec names none. Empty: ubuntu:24.04. The provider
	// never pulls: an image must already be on the engine.
	Image string
	// Workdir is the workdir of a sandbox whose spec names none (created if missing). Empty:
	// /workspace.
	Workdir string
	// EnvdBinary is the path, on the engine's host, of a static Linux hangar-envd
	// (CGO_ENABLED=0, as make build builds it) to mount into every container at EnvdPath.
	// Empty: provider.DefaultEnvdBinary (hangar-envd beside this executable).
	EnvdBinary string
	// Instance tells this control plane's containers apart from other control planes' on the
	// same engine (label dev.hangar.instance); List sees only its own. Empty: "default".
	Instance string
	// StartTimeout bounds how long Create waits for the daemon to answer /health. Zero: 30s.
	StartTimeout time.Duration
	// MemoryBytes is each sandbox's memory limit, swap included (no swap beyond it). Zero:
	// DefaultMemoryBytes; negative: no limit.
	MemoryBytes int64
	// CPUs is how many CPUs each sandbox may use (CFS quota). Zero: DefaultCPUs; negative: no
	// limit.
	CPUs float64
	// Pids is how many processes and threads each sandbox may have at once (the pids
	// cgroup): one more fork fails. Zero: DefaultPids; negative: no limit.
	Pids int64
	// DiskBytes bounds each sandbox's writable layer (--storage-opt size), which the engine
	// can do only on overlay2 over xfs mounted with pquota (or devicemapper, btrfs, zfs): on
	// another, Create fails saying so. Zero: no bound.
	DiskBytes int64
	// NoInit runs the daemon (or the idle shell) as the container's PID 1. False (the default):
	// docker's init runs as PID 1, reaping orphaned processes and forwarding signals.
	NoInit bool
	// Logger receives the provider's log lines. Nil: discarded.
	Logger *slog.Logger
	// Clock times the wait for a new daemon, execs' timeouts and the engine's settling. Nil:
	// the real clock.
	Clock quartz.Clock
}

// The limits every sandbox gets unless Config says otherwise: room for a build or a test run,
// and a bound on what one sandbox takes from the others on the engine.
const (
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 2
	DefaultPids        = 1024
)

// Capabilities are all a sandbox container keeps of the engine's default set: those root
// needs to work on files of any user (CHOWN, DAC_OVERRIDE, FOWNER, FSETID), those the daemon
// and a split turn's harness need to run commands as another uid and end them (SETUID, SETGID,
// KILL), and ports under 1024 (NET_BIND_SERVICE). Dropped: NET_RAW (raw sockets: forged
// packets, ARP spoofing on the bridge), MKNOD, SETPCAP, SETFCAP, SYS_CHROOT, AUDIT_WRITE.
var Capabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE"}

// Provider is the docker provider. It is safe for concurrent use. Close it to release the
// engine client's connections.
type Provider struct {
	cfg    Config
	cli    *client.Client
	log    *slog.Logger
	health *http.Client
}

var _ provider.Provider = (*Provider)(nil)

// New returns a docker provider. It does not contact the engine: the first call that needs it
// fails with provider.ErrUnavailable when it does not answer.
func New(cfg Config) (*Provider, error) {
	if cfg.Host == "" {
		cfg.Host = "unix:///var/run/docker.sock"
	}
	if cfg.Image == "" {
		cfg.Image = "ubuntu:24.04"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if !path.IsAbs(cfg.Workdir) {
		return nil, fmt.Errorf("new docker provider: workdir %q is not absolute", cfg.Workdir)
	}
	if cfg.EnvdBinary == "" {
		bin, _, err := provider.DefaultEnvdBinary()
		if err != nil {
			return nil, fmt.Errorf("new docker provider: %w", err)
		}
		cfg.EnvdBinary = bin
	}
	if cfg.Instance == "" {
		cfg.Instance = "default"
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = DefaultCPUs
	}
	if cfg.Pids == 0 {
		cfg.Pids = DefaultPids
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cli, err := client.NewClientWithOpts(client.WithHost(cfg.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("new docker client: %w", err)
	}
	return &Provider{
		cfg: cfg,
		cli: cli,
		log: cfg.Logger.With("provider", Name),
		// No keep-alive: a check now and then needs no idle connection left behind.
		health: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}, nil
}

// Close releases the engine client's connections.
func (p *Provider) Close() error { return p.cli.Close() }

// Name returns "docker".
func (p *Provider) Name() string { return Name }

// containerName is the container's name on the engine.
func (p *Provider) containerName(sandbox string) string {
	if p.cfg.Instance == "default" {
		return "hangar-" + sandbox
	}
	return "hangar-" + p.cfg.Instance + "-" + sandbox
}

// Create makes and starts the sandbox's container, and with spec.Daemon waits until its daemon
// answers /health.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Sandbox, error) {
	if err := names.CheckSandbox(spec.Name); err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	image := spec.Image
	if image == "" {
		image = p.cfg.Image
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = p.cfg.Workdir
	}
	if !path.IsAbs(workdir) {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: workdir %q is not absolute", spec.Name, workdir)
	}
	if _, err := p.cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			// No "create sandbox" before it: the sandbox manager says that, and this sentence
			// is what a person is shown.
			return provider.Sandbox{}, fmt.Errorf("image %s is not on the Docker engine; get it with `docker pull %s` (or `docker load` it from a file): %w",
				image, image, provider.ErrImageMissing)
		}
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: inspect image %s: %w", spec.Name, image, engineErr(err))
	}
	cfg, host, err := p.containerConfig(spec, image, workdir)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	info, err := p.startContainer(ctx, spec.Name, cfg, host)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	sb := p.sandbox(info)
	if !spec.Daemon {
		if sb.State != provider.StateRunning {
			sb = p.withLogs(ctx, sb)
		}
		return sb, nil
	}
	return p.readyDaemon(ctx, sb, info.ID), nil
}

// containerConfig is the container of a sandbox of spec: labelled with what Find and List read
// back, with hangar-envd mounted read-only at EnvdPath, and running either its daemon
// (spec.Daemon: its port published on 127.0.0.1 only) or an idle shell.
func (p *Provider) containerConfig(spec provider.Spec, image, workdir string) (*container.Config, *container.HostConfig, error) {
	env := make([]string, 0, len(spec.Env)+1)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	cfg := &container.Config{
		Image:      image,
		WorkingDir: workdir,
		Env:        env,
		Labels: map[string]string{
			labelInstance: p.cfg.Instance,
			labelSandbox:  spec.Name,
			labelOwner:    spec.Owner,
			labelDaemon:   strconv.FormatBool(spec.Daemon),
			labelWorkdir:  workdir,
		},
	}
	// A bind mount of a missing file would make the engine create a folder in its place.
	if st, err := os.Stat(p.cfg.EnvdBinary); err != nil || !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("hangar-envd, to mount at %s, is not a file at %s (%v): build it (make build) or set the daemon binary", EnvdPath, p.cfg.EnvdBinary, err)
	}
	// Also without a daemon: the turn harness runs from it.
	host := &container.HostConfig{Init: ptr(!p.cfg.NoInit), Binds: []string{p.cfg.EnvdBinary + ":" + EnvdPath + ":ro"}}
	p.lockDown(host)
	if !spec.Daemon {
		cfg.Entrypoint = []string{"/bin/sh", "-c", idleScript}
		cfg.Cmd = []string{}
		return cfg, host, nil
	}
	token, err := provider.NewAccessToken()
	if err != nil {
		return nil, nil, err
	}
	port := nat.Port(strconv.Itoa(DaemonPort) + "/tcp")
	// The daemon is given the token's hash, so it takes no request without the token from its
	// first moment on, a restart included, and from anywhere: other containers on the bridge
	// reach its port too. The token itself is never in the container: in the daemon's
	// environment or command line every command could read it (/proc/1/environ, cmdline).
	// It is kept on the host, in a label (docker inspect).
	cfg.Labels[labelToken] = token
	cfg.Entrypoint = []string{EnvdPath, "envd", "--listen", "0.0.0.0:" + strconv.Itoa(DaemonPort), "--workdir", workdir,
		"--access-token-sha256", provider.DaemonTokenSHA256(token)}
	cfg.Cmd = []string{}
	cfg.ExposedPorts = nat.PortSet{port: {}}
	// 127.0.0.1 only, on a port the engine picks: the daemon is never on the network.
	host.PortBindings = nat.PortMap{port: {{HostIP: "127.0.0.1", HostPort: ""}}}
	return cfg, host, nil
}

// lockDown bounds what a sandbox's container may take (memory, CPU, processes) and may do:
// no setuid binary or file capability raises a process's privileges (no-new-privileges), and
// of the engine's default capabilities only Capabilities are kept. The disk is bounded only when
// DiskBytes asks (few engines can).
func (p *Provider) lockDown(host *container.HostConfig) {
	if p.cfg.MemoryBytes > 0 {
		host.Memory, host.MemorySwap = p.cfg.MemoryBytes, p.cfg.MemoryBytes
	}
	if p.cfg.CPUs > 0 {
		host.NanoCPUs = int64(p.cfg.CPUs * 1e9)
	}
	if p.cfg.Pids > 0 {
		host.PidsLimit = ptr(p.cfg.Pids)
	}
	if p.cfg.DiskBytes > 0 {
		host.StorageOpt = map[string]string{"size": strconv.FormatInt(p.cfg.DiskBytes, 10)}
	}
	host.SecurityOpt = []string{"no-new-privileges=true"}
	host.CapDrop = []string{"ALL"}
	host.CapAdd = slices.Clone(Capabilities)
}

// startContainer creates and starts the container of sandbox name and returns what the engine
// says of it then. A container that cannot be started or inspected is removed.
func (p *Provider) startContainer(ctx context.Context, name string, cfg *container.Config, host *container.HostConfig) (container.InspectResponse, error) {
	created, err := p.cli.ContainerCreate(ctx, cfg, host, nil, nil, p.containerName(name))
	if err != nil && host.StorageOpt != nil && strings.Contains(err.Error(), "storage-opt") {
		return container.InspectResponse{}, fmt.Errorf("create container: this Docker engine cannot bound a container's disk "+
			"(its storage driver must be overlay2 over xfs mounted with pquota, or devicemapper, btrfs or zfs): "+
			"unset the disk limit (HANGAR_DOCKER_DISK) or move the engine's data root: %w", engineErr(err))
	}
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("create container: %w", engineErr(err))
	}
	if err := p.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		p.remove(created.ID)
		return container.InspectResponse{}, fmt.Errorf("start container: %w", engineErr(err))
	}
	info, err := p.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		p.remove(created.ID)
		return container.InspectResponse{}, fmt.Errorf("inspect container: %w", engineErr(err))
	}
	return info, nil
}

// readyDaemon waits for the daemon of the just-started sb (in container containerID) to
// answer. A daemon that does not come up makes sb failed, with the reason and the container's
// logs.
func (p *Provider) readyDaemon(ctx context.Context, sb provider.Sandbox, containerID string) provider.Sandbox {
	if sb.State != provider.StateRunning {
		return p.withLogs(ctx, failed(sb, "the sandbox's daemon did not start"))
	}
	if sb.Daemon == nil {
		return p.withLogs(ctx, failed(sb, "the container publishes no daemon port"))
	}
	if err := p.waitHealthy(ctx, containerID, sb.Daemon.URL); err != nil {
		return p.withLogs(ctx, failed(sb, fmt.Sprintf("the daemon at %s did not answer: %v", sb.Daemon.URL, err)))
	}
	return sb
}

// remove force-removes a container that Create could not finish; a failure is only logged,
// since the error that led here is the one to report.
func (p *Provider) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		p.log.Error("remove container after failed create", "container", id, "err", err)
	}
}

// waitHealthy waits for url to answer /health, until the container stops or StartTimeout passes.
func (p *Provider) waitHealthy(ctx context.Context, containerID, url string) error {
	return provider.WaitHealthy(ctx, p.health, url, envd.Wait{Timeout: p.cfg.StartTimeout, Every: 50 * time.Millisecond,
		Clock: p.cfg.Clock, Gone: func(ctx context.Context) error {
			if info, err := p.cli.ContainerInspect(ctx, containerID); err == nil && info.State != nil && !info.State.Running {
				return fmt.Errorf("the container is %s (exit code %d)", info.State.Status, info.State.ExitCode)
			}
			return nil
		}})
}

// Get inspects the sandbox's container; a running one with a daemon must answer /health.
func (p *Provider) Get(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	info, err := p.inspect(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("get sandbox %s: %w", sb.Name, err)
	}
	return p.checked(ctx, p.sandbox(info)), nil
}

// inspect finds the sandbox's container, by id or else by name, and makes sure it is this
// instance's.
func (p *Provider) inspect(ctx context.Context, sb provider.Sandbox) (container.InspectResponse, error) {
	ref := sb.ID
	if ref == "" {
		ref = p.containerName(sb.Name)
	}
	info, err := p.cli.ContainerInspect(ctx, ref)
	if err != nil {
		return info, fmt.Errorf("inspect container: %w", engineErr(err))
	}
	if info.Config == nil || info.Config.Labels[labelInstance] != p.cfg.Instance || info.Config.Labels[labelSandbox] != sb.Name {
		return info, fmt.Errorf("container %s is not this control plane's sandbox %s: %w", ref, sb.Name, provider.ErrNotFound)
	}
	return info, nil
}

// List returns the sandboxes of this instance's containers.
func (p *Provider) List(ctx context.Context) ([]provider.Sandbox, error) {
	list, err := p.cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", labelInstance+"="+p.cfg.Instance)),
	})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", engineErr(err))
	}
	out := make([]provider.Sandbox, 0, len(list))
	for _, c := range list {
		info, err := p.cli.ContainerInspect(ctx, c.ID)
		if cerrdefs.IsNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", engineErr(err))
		}
		out = append(out, p.checked(ctx, p.sandbox(info)))
	}
	return out, nil
}

// Destroy force-removes the sandbox's container.
func (p *Provider) Destroy(ctx context.Context, sb provider.Sandbox) error {
	info, err := p.inspect(ctx, sb)
	if err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	if err := p.cli.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, engineErr(err))
	}
	return nil
}

// Pause freezes every process of the container (docker pause).
func (p *Provider) Pause(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	info, err := p.inspect(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("pause sandbox %s: %w", sb.Name, err)
	}
	if err := p.cli.ContainerPause(ctx, info.ID); err != nil {
		return provider.Sandbox{}, fmt.Errorf("pause sandbox %s: %w", sb.Name, engineErr(err))
	}
	return p.settled(ctx, sb, provider.StatePaused)
}

// Resume thaws the container (docker unpause).
func (p *Provider) Resume(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	info, err := p.inspect(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("resume sandbox %s: %w", sb.Name, err)
	}
	if err := p.cli.ContainerUnpause(ctx, info.ID); err != nil {
		return provider.Sandbox{}, fmt.Errorf("resume sandbox %s: %w", sb.Name, engineErr(err))
	}
	return p.settled(ctx, sb, provider.StateRunning)
}

// settleWait bounds how long settled waits for the engine's state to follow a pause or an
// unpause it answered.
const settleWait = 10 * time.Second

// settled is Get once the container reads want: the engine (Docker 20.10) answers a pause or an
// unpause when containerd has done it, and records the new state a moment later, from
// containerd's event — a Get at once could read the old state. After settleWait it is Get as
// it is.
func (p *Provider) settled(ctx context.Context, sb provider.Sandbox, want provider.State) (provider.Sandbox, error) {
	deadline := p.cfg.Clock.NewTimer(settleWait, "docker", "settle", "timeout")
	defer deadline.Stop()
	tick := p.cfg.Clock.NewTicker(10*time.Millisecond, "docker", "settle", "poll")
	defer tick.Stop()
	for {
		got, err := p.Get(ctx, sb)
		if err != nil || got.State == want {
			return got, err
		}
		select {
		case <-ctx.Done():
			return provider.Sandbox{}, ctx.Err()
		case <-deadline.C:
			return got, nil
		case <-tick.C:
		}
	}
}

// sandbox is the provider's view of a container, without asking its daemon.
func (p *Provider) sandbox(info container.InspectResponse) provider.Sandbox {
	labels := map[string]string{}
	var env []string
	if info.Config != nil {
		labels, env = info.Config.Labels, info.Config.Env
	}
	sb := provider.Sandbox{
		Name:     labels[labelSandbox],
		Provider: Name,
		ID:       info.ID,
		State:    provider.StateRunning,
		Workdir:  labels[labelWorkdir],
		Data:     map[string]string{"container": strings.TrimPrefix(info.Name, "/")},
	}
	if info.Config != nil {
		sb.Data["image"] = info.Config.Image
	}
	if labels[labelDaemon] == "true" {
		token := labels[labelToken]
		for _, kv := range env { // containers made before the token moved to a label
			if v, ok := strings.CutPrefix(kv, tokenEnv+"="); ok && token == "" {
				token = v
			}
		}
		if port := hostPort(info); port != "" {
			sb.Daemon = &provider.Daemon{URL: "http://127.0.0.1:" + port, AccessToken: token}
			sb.Data["host_port"] = port
		}
	}
	st := info.State
	switch {
	case st == nil:
		return failed(sb, "the engine reports no state for the container")
	case st.Paused:
		sb.State = provider.StatePaused
	case st.Running:
	case st.Status == "created":
		sb.State = provider.StateCreating
	default:
		reason := fmt.Sprintf("the container is %s (exit code %d)", st.Status, st.ExitCode)
		if st.Error != "" {
			reason += ": " + st.Error
		}
		if st.OOMKilled {
			reason += "; it ran out of memory"
		}
		return failed(sb, reason)
	}
	return sb
}

// settleTimeout is how long a sandbox whose daemon does not answer is watched for its
// container stopping: long enough for the engine to notice a killed container, short enough
// for a check of a sandbox whose container runs on without its daemon.
const settleTimeout = 2 * time.Second

// stopsSoon waits up to settleTimeout for the container to stop, and returns it once stopped.
func (p *Provider) stopsSoon(ctx context.Context, id string) (container.InspectResponse, bool) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	waited, errs := p.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-waited:
	case <-errs:
		return container.InspectResponse{}, false
	}
	info, err := p.cli.ContainerInspect(ctx, id)
	if err != nil || info.State == nil || info.State.Running {
		return info, false
	}
	return info, true
}

// checked asks a running sandbox's daemon for /health.
func (p *Provider) checked(ctx context.Context, sb provider.Sandbox) provider.Sandbox {
	if sb.State != provider.StateRunning || sb.Daemon == nil {
		return sb
	}
	if err := provider.Healthy(ctx, p.health, sb.Daemon.URL); err != nil {
		// A container being killed loses its daemon before the engine reports it stopped:
		// give the engine a moment, so that the reason names the part that died.
		if info, ok := p.stopsSoon(ctx, sb.ID); ok {
			return p.withLogs(ctx, p.sandbox(info))
		}
		return failed(sb, fmt.Sprintf("the sandbox's daemon does not answer at %s: %v", sb.Daemon.URL, err))
	}
	// A container made by a hangar before daemons were given their token's hash, restarted
	// outside hangar, runs a daemon that has no token yet: give it.
	if has, err := provider.DaemonHasToken(ctx, p.health, sb.Daemon.URL); err == nil && !has {
		p.log.Warn("the sandbox's daemon runs without its token (was its container restarted?); giving it", "sandbox", sb.Name)
		if err := provider.InitDaemon(ctx, p.health, sb.Daemon.URL, sb.Daemon.AccessToken); err != nil {
			return failed(sb, fmt.Sprintf("the sandbox's daemon runs without its token and could not be given it: %v", err))
		}
	}
	return sb
}

// withLogs adds the end of the container's output to a failed sandbox's reason.
func (p *Provider) withLogs(ctx context.Context, sb provider.Sandbox) provider.Sandbox {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stdout, stderr provider.TailBuffer
	stdout.Max, stderr.Max = 1024, 1024
	rc, err := p.cli.ContainerLogs(ctx, sb.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return sb
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(&stdout, &stderr, rc); err != nil && !errors.Is(err, io.EOF) {
		return sb
	}
	if out := strings.TrimSpace(string(stderr.Bytes()) + "\n" + string(stdout.Bytes())); out != "" {
		sb.Reason += "; its output ends: " + out
	}
	return sb
}

func hostPort(info container.InspectResponse) string {
	if info.NetworkSettings == nil {
		return ""
	}
	for _, b := range info.NetworkSettings.Ports[nat.Port(strconv.Itoa(DaemonPort)+"/tcp")] {
		if b.HostIP == "127.0.0.1" && b.HostPort != "" {
			return b.HostPort
		}
	}
	return ""
}

func failed(sb provider.Sandbox, reason string) provider.Sandbox {
	sb.State = provider.StateFailed
	if sb.Reason == "" {
		sb.Reason = reason
	} else {
		sb.Reason = reason + "; " + sb.Reason
	}
	return sb
}

// engineErr marks an engine error with the provider sentinel it means.
func engineErr(err error) error {
	switch {
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %w", provider.ErrUnavailable, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	return err
}

func ptr[T any](v T) *T { return &v }
