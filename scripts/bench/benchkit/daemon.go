package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Daemon is a sandbox daemon a bench started itself, on loopback, without a token.
type Daemon struct {
	URL string
	cmd *exec.Cmd
}

// StartDaemon runs `bin envd` on 127.0.0.1:0 in dir (its workdir, address file and log
// envd.log), behind wrap (a command that runs it, such as valgrind's; nil: none), with the
// given extra environment, and waits for its address: 10 s, or 5 minutes behind a wrapper.
func StartDaemon(ctx context.Context, wrap []string, bin, dir string, env ...string) (*Daemon, error) {
	addrFile := filepath.Join(dir, "address")
	workdir := filepath.Join(dir, "work")
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return nil, err
	}
	os.Remove(addrFile)
	argv := append(append(append([]string{}, wrap...), bin), "envd", "--listen", "127.0.0.1:0", "--address-file", addrFile, "--workdir", workdir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(dir, "envd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// The daemon dies with the bench, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	d := &Daemon{cmd: cmd}
	wait := 10 * time.Second
	if len(wrap) > 0 {
		wait = 5 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			d.URL = "http://" + strings.TrimSpace(string(b))
			return d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			d.Stop()
			return nil, fmt.Errorf("%s wrote no address in %v (see %s)", bin, wait, logf.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Stop ends the daemon (SIGTERM: it kills its processes) and reaps it, killing it after 30 s.
func (d *Daemon) Stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}
