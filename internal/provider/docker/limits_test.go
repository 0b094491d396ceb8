package docker

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestLimitsByDefault: a sandbox's container gets the default memory, CPU and pids limits, no
// swap beyond its memory, no-new-privileges, and only Capabilities; inside it, root's
// effective capabilities lack NET_RAW and no process can gain privileges.
func TestLimitsByDefault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	for _, daemon := range []bool{true, false} {
		sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("limits"), Daemon: daemon})
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
		h := info.HostConfig
		if h.Memory != DefaultMemoryBytes || h.MemorySwap != DefaultMemoryBytes || h.NanoCPUs != DefaultCPUs*1e9 || h.PidsLimit == nil || *h.PidsLimit != DefaultPids {
			t.Errorf("daemon %v: memory %d (swap %d), nano CPUs %d, pids %v; want %d, %[2]d, %d, %d", daemon,
				h.Memory, h.MemorySwap, h.NanoCPUs, h.PidsLimit, DefaultMemoryBytes, int64(DefaultCPUs*1e9), DefaultPids)
		}
		// The engine names them CAP_X, sorted.
		var added []string
		for _, c := range h.CapAdd {
			added = append(added, strings.TrimPrefix(c, "CAP_"))
		}
		slices.Sort(added)
		if want := slices.Sorted(slices.Values(Capabilities)); !slices.Equal(h.CapDrop, []string{"ALL"}) || !slices.Equal(added, want) || !slices.Contains(h.SecurityOpt, "no-new-privileges=true") {
			t.Errorf("daemon %v: cap drop %v, add %v, security options %v; want ALL, %v, no-new-privileges", daemon, h.CapDrop, h.CapAdd, h.SecurityOpt, Capabilities)
		}
		res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: `grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status`})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("read a command's status: %v %+v", err, res)
		}
		status := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			k, v, _ := strings.Cut(line, ":")
			status[k] = strings.TrimSpace(v)
		}
		const capNetRaw, capSysAdmin, capSysPtrace = 13, 21, 19
		for _, k := range []string{"CapEff", "CapBnd"} {
			caps, err := strconv.ParseUint(status[k], 16, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", k, status[k], err)
			}
			for _, c := range []uint{capNetRaw, capSysAdmin, capSysPtrace} {
				if caps&(1<<c) != 0 {
					t.Errorf("daemon %v: %s %s has capability %d", daemon, k, status[k], c)
				}
			}
		}
		if status["NoNewPrivs"] != "1" {
			t.Errorf("daemon %v: NoNewPrivs %q, want 1", daemon, status["NoNewPrivs"])
		}
	}
}

// TestForkBombContained: a command that starts processes without end is stopped by the pids
// limit (each fork past it fails at once), the sandbox's daemon keeps answering, and the
// bomb's shell sees the fork fail before it has started as many processes as the limit.
func TestForkBombContained(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cli := dockertest.Client(t)
	img, err := dockertest.EnsureBusyboxImage(ctx, cli)
	if err != nil {
		t.Fatalf("make test image: %v", err)
	}
	const limit = 64
	p := newProvider(t, providertest.UniqueName("test"), func(c *Config) { c.Image = img; c.Pids = limit })
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("forkbomb"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateRunning {
		t.Fatalf("Create: %s (%s)", sb.State, sb.Reason)
	}
	// 4×limit tries, each a process blocked reading a FIFO whose only writer is the bomb's
	// shell: once that shell is gone (busybox's sh exits when a fork fails) they read EOF and
	// end, with no clock. The shell prints how many it has started so far.
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: `mkfifo /tmp/bomb; exec 3<>/tmp/bomb; i=0
while [ $i -lt ` + strconv.Itoa(4*limit) + ` ]; do
	(read -r x </tmp/bomb) 3>&- >/dev/null 2>&1 &
	i=$((i+1)); echo "$i"
done
echo "the pids limit did not stop me"`})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	lines := strings.Fields(string(res.Stdout))
	n, _ := strconv.Atoi(lines[len(lines)-1])
	t.Logf("the fork bomb started %d processes under a pids limit of %d, then: exit %d, %q", n, limit, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	if n == 0 || n >= limit || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "can't fork") {
		t.Errorf("the fork bomb ended with exit %d, last output %q, stderr %q; want it stopped by a failed fork before %d processes",
			res.ExitCode, lines[len(lines)-1], res.Stderr, limit)
	}
	// The daemon was never short of processes, and answers once the bomb's are gone.
	got, err := p.Get(ctx, sb)
	if err != nil || got.State != provider.StateRunning {
		t.Errorf("after the fork bomb: %+v, %v; want the sandbox running, its daemon answering", got, err)
	}
}

// TestDiskLimit: a disk limit reaches the engine (--storage-opt size); an engine that cannot
// bound a container's disk (overlay2 over ext4, as here) refuses it, and Create says why and
// what to do, rather than making a sandbox without the bound.
func TestDiskLimit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), func(c *Config) { c.DiskBytes = 1 << 30 })
	info, err := p.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var backing string
	for _, kv := range info.DriverStatus {
		if kv[0] == "Backing Filesystem" {
			backing = kv[1]
		}
	}
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("disk")})
	t.Logf("%s over %s: Create with a 1 GiB disk limit: %v", info.Driver, backing, err)
	if info.Driver == "overlay2" && backing != "xfs" {
		if err == nil || !strings.Contains(err.Error(), "cannot bound a container's disk") || !strings.Contains(err.Error(), "HANGAR_DOCKER_DISK") {
			t.Errorf("Create on overlay2 over %s with a disk limit: %v; want it refused, saying why and what to do", backing, err)
		}
		if err == nil {
			p.Destroy(ctx, sb)
		}
		return
	}
	if err != nil {
		t.Skipf("%s over %s: %v", info.Driver, backing, err) // xfs without pquota: the engine's own error
	}
	defer p.Destroy(ctx, sb)
	got, err := p.cli.ContainerInspect(ctx, sb.ID)
	if err != nil || got.HostConfig.StorageOpt["size"] != "1073741824" {
		t.Errorf("storage options %v, %v; want size 1073741824", got.HostConfig.StorageOpt, err)
	}
}
