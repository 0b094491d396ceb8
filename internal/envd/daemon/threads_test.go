package daemon_test

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// TestProcessesDoNotHoldThreads: 64 running processes, half on pipes and half on ptys, do
// not cost the daemon a thread each, nor a read buffer while they are quiet. Every process's
// output readers (and its exit waiter, once they are done) park in the runtime's poller ("IO wait"); a blocking wait4 or
// a read of a blocking pty would hold an OS thread each instead, and they would never show as
// parked. A reader takes its buffer only once its descriptor is readable.
//
// Not parallel: it counts the test process's threads (/proc/self/task), to which parallel
// tests would add.
func TestProcessesDoNotHoldThreads(t *testing.T) {
	const procs = 64
	url := serve(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	before := threads(t)

	for i := range procs {
		req := `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]}}`
		if i%2 == 1 {
			req = `{"process":{"cmd":"sh","args":["-c","echo ready; exec sleep 600"]},"pty":{"size":{"cols":80,"rows":24}}}`
		}
		s := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, req))
		s.next() // start
		s.next() // ready: its reader has run
	}
	// Two readers per process on pipes, one per pty. (The exit waiter opens its pidfd and
	// parks once the output has ended: see TestDescriptorsPerProcess.)
	const want = procs/2*2 + procs/2
	deadline := time.Now().Add(shortWait)
	for parked := parkedInDaemon(); parked < want; parked = parkedInDaemon() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d waiters and readers of %d processes are parked in the poller; the rest hold threads (%d threads, %d before)",
				parked, want, procs, threads(t), before)
		}
		runtime.Gosched()
	}
	// The daemon's own few threads (GOMAXPROCS, sysmon, a fork or two in flight) at most.
	if n := threads(t); n-before > 12 {
		t.Errorf("%d threads with %d processes running, %d before: want at most 12 more", n, procs, before)
	}
	// Every reader gave its buffer back before it parked.
	if n := daemon.ReadBuffersHeld(); n != 0 {
		t.Errorf("%d quiet processes hold %d read buffers (32 KiB each), want none", procs, n)
	}
}

// threads is how many OS threads this process has.
func threads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// parkedInDaemon counts the goroutines waiting in the poller in a process's exit waiter or
// output reader.
func parkedInDaemon() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(" [IO wait")) &&
			(bytes.Contains(g, []byte("daemon.waitExit(")) || bytes.Contains(g, []byte("daemon.(*process).read("))) {
			n++
		}
	}
	return n
}
