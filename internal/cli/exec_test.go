package cli_test

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestExecSeparatesStreamsAndExits: exec prints the command's stdout on stdout and its stderr
// on stderr, and exits with its exit code; several arguments reach the command as they are.
func TestExecSeparatesStreamsAndExits(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "exec-box")
	env := s.env(t)
	r := hangar(t, env, "", "exec", "exec-box", "--", "echo out; echo err >&2; exit 3").want(t, 3)
	if r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("stdout %q, stderr %q; want out and err each on its own", r.stdout, r.stderr)
	}
	r = hangar(t, env, "", "exec", "exec-box", "--", "printf", "%s|", "a b", "it's", "$HOME").want(t, 0)
	if r.stdout != "a b|it's|$HOME|" {
		t.Errorf("argv through exec = %q, want each argument as it is", r.stdout)
	}
	hangar(t, env, "", "sandbox", "create", "--no-daemon", "exec-nod").want(t, 0)
	t.Cleanup(func() { hangar(t, env, "", "sandbox", "rm", "exec-nod") })
	r = hangar(t, env, "", "exec", "exec-nod", "--", "echo out; echo err >&2; exit 3").want(t, 3)
	if r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("without a daemon: stdout %q, stderr %q; want out and err each on its own", r.stdout, r.stderr)
	}
	r = hangar(t, env, "", "exec", "--timeout", "0.5", "exec-box", "--", "sleep 30").want(t, 124)
	if !strings.Contains(r.stderr, "timeout") {
		t.Errorf("a timed-out command's stderr = %q, want it to say so", r.stderr)
	}
	r = hangar(t, env, "", "exec", "no-such-box", "--", "true").want(t, 1)
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "hangar: ") {
		t.Errorf("an unknown sandbox's error = %q, want one line", r.stderr)
	}
}

// TestExecInterruptKillsTheCommand: Ctrl-C (SIGINT to the client) ends the remote command, as
// the REST client going away does, and the client exits 130; with -i too (the command then
// runs as a background process, which the client kills). attach, interrupted, detaches: the
// process runs on.
func TestExecInterruptKillsTheCommand(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "int-box")
	for _, c := range []struct {
		name  string
		args  []string
		ended bool
	}{
		{"exec", []string{"exec", "int-box", "--", "echo $$; exec sleep 300"}, true},
		{"exec -i", []string{"exec", "-i", "int-box", "--", "echo $$; exec sleep 300"}, true},
		{"attach", []string{"attach", "int-box"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "attach" {
				id := s.api(t, "POST", "/api/sandboxes/int-box/processes", `{"command": "echo $$; exec sleep 300"}`)["process_id"].(string)
				defer s.api(t, "DELETE", "/api/sandboxes/int-box/processes/"+id, "")
				c.args = append(c.args, id)
			}
			b := startHangar(t, s.env(t), c.args...)
			pid, err := strconv.Atoi(strings.TrimSpace(b.line(t)))
			if err != nil {
				t.Fatalf("the command's pid: %v", err)
			}
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("the command (pid %d) does not run: %v", pid, err)
			}
			b.cmd.Process.Signal(syscall.SIGINT)
			if code := b.wait(t); code != 130 {
				t.Errorf("exit code after Ctrl-C = %d, want 130", code)
			}
			if !c.ended {
				if err := syscall.Kill(pid, 0); err != nil {
					t.Errorf("attach's Ctrl-C ended the process: %v", err)
				}
				return
			}
			// The local provider's commands are processes of this machine.
			eventually(t, "the remote command ends", func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
		})
	}
}

// TestExecInteractive: -i forwards stdin, closes the command's at its end, and exits with the
// command's code.
func TestExecInteractive(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "in-box")
	r := hangar(t, s.env(t), "hello\nworld\n", "exec", "-i", "in-box", "--", "cat; exit 4").want(t, 4)
	if r.stdout != "hello\nworld\n" {
		t.Errorf("stdout = %q, want what stdin said", r.stdout)
	}
}
