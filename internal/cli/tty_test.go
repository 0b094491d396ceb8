package cli_test

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyRun is the client run on a real pseudo-terminal: the test types into it and reads the
// screen.
type ptyRun struct {
	cmd    *exec.Cmd
	master interface {
		io.ReadWriter
	}
	mu     sync.Mutex
	screen bytes.Buffer
	done   chan struct{} // closed once the client exited and its screen was read to the end
	code   int
}

func startPTY(t *testing.T, env []string, size *pty.Winsize, args ...string) (*ptyRun, func(*pty.Winsize)) {
	t.Helper()
	cmd := exec.Command(hangarBin, args...)
	cmd.Env = env
	f, err := pty.StartWithSize(cmd, size)
	if err != nil {
		t.Fatal(err)
	}
	r := &ptyRun{cmd: cmd, master: f, done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read) // the master reads EIO once the client exited: all it wrote is read
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			r.mu.Lock()
			r.screen.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		r.code = cmd.ProcessState.ExitCode()
		<-read
		close(r.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.done
		f.Close()
	})
	return r, func(ws *pty.Winsize) { pty.Setsize(f, ws) }
}

func (r *ptyRun) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.screen.String()
}

func (r *ptyRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(waitTimeout):
		t.Fatalf("hangar did not end; the screen: %q", r.text())
		return 0
	}
}

// TestExecTTY: -t runs the command on a terminal of this terminal's size, follows a resize
// (SIGWINCH), and puts this terminal in raw mode: Ctrl-C is typed into the remote terminal
// (the remote command's trap runs) rather than interrupting the client.
func TestExecTTY(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "tty-box")
	r, resize := startPTY(t, s.env(t), &pty.Winsize{Rows: 17, Cols: 91},
		"exec", "-t", "tty-box", "--", "trap 'echo caught; exit 3' INT; stty size; while read x; do stty size; done")
	eventually(t, "the remote terminal's size 17 91", func() bool { return strings.Contains(r.text(), "17 91") })
	resize(&pty.Winsize{Rows: 30, Cols: 100})
	// The resize reaches the remote terminal through hangar in its own time: press Enter, which
	// prints the size again, until it shows the new one.
	eventually(t, "the remote terminal's size 30 100", func() bool {
		r.master.Write([]byte("\r"))
		return strings.Contains(r.text(), "30 100")
	})
	r.master.Write([]byte{3}) // Ctrl-C
	if code := r.wait(t); code != 3 {
		t.Errorf("exit code = %d, want the remote command's 3 (its INT trap); the screen: %q", code, r.text())
	}
	if !strings.Contains(r.text(), "caught") {
		t.Errorf("the remote trap did not run: %q", r.text())
	}
}

// TestExecTTYWithoutASize: a terminal that reports no size (0 by 0, as one under `script`
// may) gets a remote terminal of 80 by 24, not an error.
func TestExecTTYWithoutASize(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "nosize-box")
	r, _ := startPTY(t, s.env(t), &pty.Winsize{}, "exec", "-t", "nosize-box", "--", "stty size")
	if code := r.wait(t); code != 0 || !strings.Contains(r.text(), "24 80") {
		t.Errorf("exit %d, screen %q; want 0 and the remote terminal's size 24 80", code, r.text())
	}
}

// TestColourOnlyOnATerminal: tables are coloured on a terminal, never in a pipe, never with
// NO_COLOR.
func TestColourOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "colour-box")
	if r := hangar(t, s.env(t), "", "sandbox", "ls").want(t, 0); strings.Contains(r.stdout, "\x1b[") || !strings.Contains(r.stdout, "colour-box") {
		t.Errorf("sandbox ls into a pipe = %q, want the sandbox and no colour", r.stdout)
	}
	onTerm, _ := startPTY(t, s.env(t), &pty.Winsize{Rows: 24, Cols: 200}, "sandbox", "ls")
	onTerm.wait(t)
	if !strings.Contains(onTerm.text(), "\x1b[32mrunning") {
		t.Errorf("sandbox ls on a terminal = %q, want running in green", onTerm.text())
	}
	spin, _ := startPTY(t, s.env(t), &pty.Winsize{Rows: 24, Cols: 200}, "sandbox", "create", "spin-box")
	spin.wait(t)
	defer hangar(t, s.env(t), "", "sandbox", "rm", "spin-box")
	if !strings.Contains(spin.text(), "making sandbox spin-box…") {
		t.Errorf("sandbox create on a terminal = %q, want a spinner", spin.text())
	}
	noColour, _ := startPTY(t, s.env(t, "NO_COLOR=1"), &pty.Winsize{Rows: 24, Cols: 200}, "sandbox", "ls")
	noColour.wait(t)
	if strings.Contains(noColour.text(), "\x1b[") || !strings.Contains(noColour.text(), "colour-box") {
		t.Errorf("sandbox ls with NO_COLOR = %q, want no colour", noColour.text())
	}
}
