package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
)

// The relay floor: what one more process on the way costs a line on this machine, whatever
// that process does. The relay is the leanest relay there can be: a process of its own that
// reads the daemon's stream with the envd client and writes each output's bytes to a plain TCP
// connection, on one goroutine, with no HTTP, no JSON, no queue. hangar is such a relay, with
// HTTP and a stream registry between (bench/README.md).

// RelayVerb is the first argument that makes a bench program the relay: its main calls
// RelayMain(os.Args[2], os.Args[3]) when it sees it.
const RelayVerb = "relay-floor"

// RelayMain serves as the relay of the daemon at url: it prints its address, then for each
// connection reads one line (a bash command), runs it in the daemon and writes its stdout to
// the connection until it ends. It returns only on an error.
func RelayMain(url, token string) error {
	c, err := envd.New(envd.Config{URL: url, AccessToken: token})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go relayOne(c, conn)
	}
}

func relayOne(c *envd.Client, conn net.Conn) {
	defer conn.Close()
	cmd, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return
	}
	st, err := c.Start(context.Background(), envd.StartRequest{Cmd: "bash", Args: []string{"-lc", strings.TrimSpace(cmd)}})
	if err != nil {
		return
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			return
		}
		if ev.Kind == envd.EventStdout {
			if _, err := conn.Write(ev.Data); err != nil {
				return
			}
		}
	}
}

// Relay is a relay process a bench started.
type Relay struct {
	Addr string // where it listens
	cmd  *exec.Cmd
}

// StartRelay runs this program as the relay of the daemon at url, behind wrap (a command such
// as valgrind's that runs the program; nil: none), and waits for its address.
func StartRelay(ctx context.Context, wrap []string, url, token string) (*Relay, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := append(append(append([]string{}, wrap...), self), RelayVerb, url, token)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the relay: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		a, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(a)
	}()
	select {
	case a := <-addr:
		if a != "" {
			return &Relay{Addr: a, cmd: cmd}, nil
		}
	case <-ctx.Done():
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("the relay did not say its address")
}

// PID is the relay's process id.
func (r *Relay) PID() int { return r.cmd.Process.Pid }

// Stop ends the relay with SIGTERM (so that a wrapper such as valgrind writes its figures) and
// waits for it, killing it after 30 s.
func (r *Relay) Stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
}

// Dial connects to the relay and has it run cmd: what it prints comes on the connection.
func (r *Relay) Dial(ctx context.Context, cmd string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.Addr)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
