package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/envd"
)

// The relay floor: what one more process on the way costs a line on this machine, whatever
// that process does. relay is the leanest relay there can be: a process of its own that reads
// the daemon's stream with the envd client (as the raw_daemon mode does) and writes each
// output's bytes to a plain TCP connection, on one goroutine, with no HTTP, no JSON, no
// queue. hangar is such a relay, with HTTP and a stream registry between: its ratio to the raw
// daemon cannot be below this one's (bench/README.md).

// relayVerb is the argument that makes this program the relay (run by relayFloor).
const relayVerb = "relay-floor"

// relayMain serves as the relay of the daemon at url: it prints its address, then for each
// connection reads one line (a bash command), runs it in the daemon and writes its stdout to
// the connection until it ends.
func relayMain(url, token string) error {
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

// relayFloor runs cmd through the relay (started at the first run) and reads its output.
func (b *bench) relayFloor(ctx context.Context, cmd string, _ time.Duration) (run, error) {
	if b.relay == nil {
		if err := b.startRelay(ctx); err != nil {
			return run{}, err
		}
	}
	r := run{start: time.Now()}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", b.relayAddr)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return r, err
	}
	var lr lineReader
	err = lr.readAll(conn)
	r.lines = lr.lines
	return r, err
}

// startRelay runs this program as the relay of the bench's sandbox's daemon.
func (b *bench) startRelay(ctx context.Context) error {
	url, token, err := b.daemonAddress(ctx)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, relayVerb, url, token)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the relay: %w", err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("the relay did not say its address: %w", err)
	}
	b.relay, b.relayAddr = cmd, strings.TrimSpace(addr)
	return nil
}

// stopRelay ends the relay, if one runs.
func (b *bench) stopRelay() {
	if b.relay != nil {
		b.relay.Process.Kill()
		b.relay.Wait()
		b.relay = nil
	}
}
