package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/store/postgres/pgtest"
)

// skipLoudly skips a test that lacks what it needs, in capitals so the summary shows it; in CI
// (CI=true), where everything is installed, it fails it instead.
func skipLoudly(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// daemonPID is the host pid of the sandbox's daemon: on local, from the provider's record in
// the sandbox's folder; on Docker, the container's first process (the daemon is its
// entrypoint).
func (s *scenario) daemonPID() int {
	t := s.t
	t.Helper()
	id := providertest.Str(s.sandbox["provider_id"])
	if s.provider == "docker" {
		info, err := s.docker.ContainerInspect(context.Background(), id)
		if err != nil || info.State == nil || info.State.Pid == 0 {
			t.Fatalf("inspect container %s: %v", id, err)
		}
		// The container's first process is docker-init (the provider runs containers with
		// --init); the daemon is its child.
		if pid := childNamed(info.State.Pid, "hangar-envd"); pid != 0 {
			return pid
		}
		return info.State.Pid
	}
	b, err := os.ReadFile(filepath.Join(id, "sandbox.json"))
	if err != nil {
		t.Fatalf("read the local sandbox's record: %v", err)
	}
	var rec struct{ Daemon struct{ PID int } }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Daemon.PID == 0 {
		t.Fatalf("read the local sandbox's record: %v: %s", err, b)
	}
	return rec.Daemon.PID
}

// killDaemon is `kill -9` of the sandbox's daemon.
func killDaemon(s *scenario) {
	if err := syscall.Kill(s.daemonPID(), syscall.SIGKILL); err != nil {
		s.t.Fatalf("kill the daemon: %v", err)
	}
}

// stopContainer is `docker stop -t 1` of the sandbox's container.
func stopContainer(s *scenario) {
	one := 1
	if err := s.docker.ContainerStop(context.Background(), providertest.Str(s.sandbox["provider_id"]), container.StopOptions{Timeout: &one}); err != nil {
		s.t.Fatalf("stop the container: %v", err)
	}
}

// destroySandbox is DELETE /api/sandboxes/{name}.
func destroySandbox(s *scenario) { s.must("DELETE", "/api/sandboxes/"+s.name, nil) }

// restartHangar is `kill -9` of hangar serve, then starting it again on the same data.
func restartHangar(s *scenario) {
	s.serve.Kill()
	s.restart()
}

// exhaustDescriptors lowers the daemon's soft RLIMIT_NOFILE (prlimit) to 3, below the
// descriptors it holds, so it can open no more (a descriptor it closes frees a number above
// the limit); undo restores it. The hard limit stays: raising it again would need
// CAP_SYS_RESOURCE, which root in a container may lack.
func exhaustDescriptors(s *scenario) {
	pid := s.daemonPID()
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		s.t.Fatalf("read the daemon's RLIMIT_NOFILE: %v", err)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: old.Max}, nil); err != nil {
		s.t.Fatalf("lower the daemon's RLIMIT_NOFILE: %v", err)
	}
	s.undo = func() {
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
			s.t.Errorf("restore the daemon's RLIMIT_NOFILE: %v", err)
		}
	}
}

// dataTmpfs mounts a small tmpfs on hangar's data dir (root only), unmounted when the test ends.
func dataTmpfs(s *scenario) []string {
	if os.Geteuid() != 0 {
		skipLoudly(s.t, "NOT ROOT: the full-disk faults (a tmpfs on the data dir) NOT RUN; run the suite as root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", s.dir).CombinedOutput(); err != nil {
		skipLoudly(s.t, "CANNOT MOUNT A TMPFS (%v: %s): the full-disk faults NOT RUN", err, out)
	}
	s.t.Cleanup(func() { exec.Command("umount", "-l", s.dir).Run() })
	return nil
}

// fillDisk writes a file into the data dir until the file system is full; undo removes it.
func fillDisk(s *scenario) {
	path := filepath.Join(s.dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		s.t.Fatalf("fill the data dir: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := 0; i < 1024; i++ { // the tmpfs holds 64 MiB: bounded all the same
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		s.t.Fatalf("fill the data dir: want ENOSPC, got %v", err)
	}
	s.undo = func() { os.Remove(path) }
}

// privatePostgres makes and starts a PostgreSQL of the suite's own (pgtest: skipping loudly
// when this machine cannot), stopped and removed when the test ends; it returns serve's flag
// for it.
func privatePostgres(s *scenario) []string {
	s.pg = pgtest.Start(s.t)
	return []string{"--database-url", s.pg.URL()}
}

// stopPostgres stops the private PostgreSQL at once (immediate: as a crash); undo starts it
// again.
func stopPostgres(s *scenario) {
	if err := s.pg.Stop(); err != nil {
		s.t.Fatal(err)
	}
	s.undo = func() {
		if err := s.pg.Restart(); err != nil {
			s.t.Error(err)
		}
	}
}

// agentProcesses lists the processes (on this host, which sees a container's too) whose
// command line has the scenario's marker: what is left of its agents. Zombies are not counted.
func (s *scenario) agentProcesses() []string {
	return processesWith(s.marker)
}

func processesWith(needle string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), needle) {
			continue
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	return out
}

// sweep ends whatever the scenario left running, whatever happened: the agents' processes,
// the local sandbox's daemon and what it ran (their command lines name the data dir), the
// Docker container.
func (s *scenario) sweep() {
	for _, needle := range []string{s.marker, s.workTag, s.dir} {
		for _, p := range processesWith(needle) {
			if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if s.provider == "docker" && s.sandbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.docker.ContainerRemove(ctx, providertest.Str(s.sandbox["provider_id"]), container.RemoveOptions{Force: true})
	}
}

// childNamed is the pid of pid's child whose command name is comm, or 0.
func childNamed(pid int, comm string) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(raw)) {
		child, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child)); err == nil && strings.TrimSpace(string(name)) == comm {
			return child
		}
	}
	return 0
}
