package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// TestDescriptorsPerProcess: a running process costs the daemon at most three descriptors
// (issue 31): the read ends of its stdout and stderr and the write end of its stdin, two
// without stdin, one on a pty. Before, every process also held two pidfds for as long as it
// ran (Go's handle and the exit waiter's): 5, 4 and 3, and a daemon at 20,000 descriptors ran
// out at ~4,000 processes.
//
// The count is of the test process's descriptors that are not sockets (the requests' own
// connections are sockets): pipes, pidfds and ptys. Not parallel, for the same reason.
func TestDescriptorsPerProcess(t *testing.T) {
	const procs = 16
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()

	// What the daemon opens once, at its first start, is not a process's.
	warm := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]}}`))
	warm.next()
	warm.next()
	for _, c := range []struct {
		name, req string
		want      int
	}{
		{"stdin", `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]}}`, 3},
		{"no stdin", `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]},"stdin":false}`, 2},
		{"pty", `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]},"pty":{"size":{"cols":80,"rows":24}}}`, 1},
	} {
		before := fileDescriptors(t)
		for range procs {
			s := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, c.req))
			s.next() // start: the daemon has what it keeps of the process
			s.next() // ready
		}
		after := fileDescriptors(t)
		got := len(after) - len(before)
		t.Logf("%s: %.2f descriptors a running process", c.name, float64(got)/procs)
		if got > procs*c.want {
			t.Errorf("%s: %d running processes hold %d descriptors (%.2f each), want at most %d each; now open: %s",
				c.name, procs, got, float64(got)/procs, c.want, strings.Join(kinds(after), " "))
		}
	}
}

// fileDescriptors lists this process's open descriptors that are not sockets, by what they
// name ("pipe:[123]", "anon_inode:[pidfd]", "/dev/ptmx").
func fileDescriptors(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || strings.HasPrefix(target, "socket:") {
			continue // closed meanwhile (ReadDir's own), or a connection
		}
		fds = append(fds, target)
	}
	return fds
}

// kinds counts descriptors by kind, for a failure's message: "pipe×48 anon_inode:[pidfd]×32".
func kinds(fds []string) []string {
	n := map[string]int{}
	var order []string
	for _, f := range fds {
		k, _, _ := strings.Cut(f, ":[")
		if k == "anon_inode" {
			k = f
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = k + "×" + strconv.Itoa(n[k])
	}
	return out
}
