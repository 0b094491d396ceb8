package cli_test

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// cutter is a TCP proxy to a server whose connections the test can cut, all at once.
type cutter struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutter(t *testing.T, to string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to}
	c.wg.Add(1)
	go c.accept()
	t.Cleanup(func() {
		ln.Close()
		c.cut()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) accept() {
	defer c.wg.Done()
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.to)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		c.wg.Add(2)
		go func() { defer c.wg.Done(); io.Copy(out, in); out.Close() }()
		go func() { defer c.wg.Done(); io.Copy(in, out); in.Close() }()
	}
}

// cut closes every connection made so far.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// TestAttachResumesAfterADroppedConnection: attach's connection is cut while the process
// prints; attach reconnects with Last-Event-ID and the output is exactly the process's, no
// line lost, none twice.
func TestAttachResumesAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "drop-box")
	proxy := newCutter(t, s.addr)
	// 5 ms between lines, waited with bash's read -t on a pipe nothing writes to: a sleep
	// process per line made the 300 lines take longer than the test waits on a busy machine.
	id := s.api(t, "POST", "/api/sandboxes/drop-box/processes", `{"command": "exec 9<> <(:); for i in $(seq 1 300); do echo $i; read -t 0.005 -u 9 || :; done"}`)["process_id"].(string)
	env := s.env(t, "HANGAR_URL=http://"+proxy.ln.Addr().String())
	b := startHangar(t, env, "attach", "drop-box", id)
	var got strings.Builder
	for i := 0; i < 3; i++ { // cut it three times, each after a line came
		got.WriteString(b.line(t))
		proxy.cut()
	}
	got.WriteString(b.rest(t))
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Errorf("attach's output across dropped connections = %q, want 1 to 300 once each", got.String())
	}
	if code := b.wait(t); code != 0 {
		t.Errorf("exit code %d; stderr %s", code, b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "reconnecting") {
		t.Errorf("stderr = %q, want it to say it reconnected", b.stderr.String())
	}
}
