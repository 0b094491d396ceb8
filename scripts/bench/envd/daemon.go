package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// subject is a daemon binary the bench starts itself: run as `<bin> envd`.
type subject struct {
	name string // in the results: "before" or "hangar-envd"
	bin  string
	desc string // how it was built
}

// start runs s's daemon on 127.0.0.1:0 without a token and waits for its address.
func (s subject) start(ctx context.Context, dir string) (*benchkit.Daemon, error) {
	return benchkit.StartDaemon(ctx, nil, s.bin, dir)
}

// procStatus reads a process's resident memory (bytes) and OS threads from /proc.
func procStatus(pid int) (rss int64, threads int, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			kb, _ := strconv.ParseInt(fields[0], 10, 64)
			rss = kb << 10
		case "Threads":
			threads, _ = strconv.Atoi(fields[0])
		}
	}
	return rss, threads, sc.Err()
}

// sampler keeps the highest RSS and thread count of a process, read every 50 ms until stop.
type sampler struct {
	maxRSS     int64
	maxThreads int
	stopped    chan struct{}
	done       chan struct{}
}

func sample(pid int) *sampler {
	s := &sampler{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, th, err := procStatus(pid); err == nil {
				s.maxRSS, s.maxThreads = max(s.maxRSS, rss), max(s.maxThreads, th)
			}
			select {
			case <-s.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the highest values seen.
func (s *sampler) stop() (int64, int) {
	close(s.stopped)
	<-s.done
	return s.maxRSS, s.maxThreads
}

// moduleRoot is the folder of this module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find go.mod: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// goBuild builds pkg of the module at root into out, as make build does (static, stripped).
func goBuild(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// subjects builds (or takes) the daemons to compare: before (hangar envd at c.oldRev) and
// hangar-envd from this tree.
func subjects(c config, dir string) ([]subject, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	var subs []subject
	switch {
	case c.oldBin != "":
		subs = append(subs, subject{name: "before", bin: c.oldBin, desc: "`" + filepath.Base(c.oldBin) + " envd` (given)"})
	case c.oldRev != "":
		src := filepath.Join(dir, "old-src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		// The tree at that revision, built on its own (the module cache is shared).
		archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", c.oldRev, src)
		archive.Dir = root
		if b, err := archive.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("git archive %s: %w: %s", c.oldRev, err, b)
		}
		bin := filepath.Join(dir, "hangar-before")
		if err := goBuild(src, "./cmd/hangar", bin); err != nil {
			return nil, err
		}
		subs = append(subs, subject{name: "before", bin: bin, desc: "`hangar envd` at " + c.oldRev})
	}
	bin := c.newBin
	desc := "`hangar-envd envd` (given)"
	if bin == "" {
		bin = filepath.Join(dir, "hangar-envd")
		if err := goBuild(root, "./cmd/hangar-envd", bin); err != nil {
			return nil, err
		}
		desc = "`hangar-envd envd` at " + commit(root)
	}
	return append(subs, subject{name: "hangar-envd", bin: bin, desc: desc}), nil
}

// commit is the tree's commit, with -dirty when it has changes.
func commit(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
