package local

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/provider"
)

// waitDelay bounds how long an exec waits for its output pipes after the command ended or was
// killed: a background child that keeps them open must not hold the result forever.
const waitDelay = 2 * time.Second

// runCommand runs req.Command in its own process group in cwd, and kills the whole group when
// req.Timeout passes or ctx ends.
func runCommand(ctx context.Context, req provider.ExecRequest, cwd string, env []string) (provider.ExecResult, error) {
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	argv := provider.ShellArgv(req.Command)
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = cwd
	cmd.Env = env
	var stdout, stderr provider.TailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	res := provider.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ctx.Err() != nil {
		return res, fmt.Errorf("exec %q: %w", req.Command, ctx.Err())
	}
	if runCtx.Err() != nil {
		res.TimedOut = true
		res.ExitCode = 128 + int(syscall.SIGKILL)
		return res, nil
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitCode(exitErr)
	case errors.Is(err, exec.ErrWaitDelay):
		// The command ended; a child of it kept the output open past waitDelay.
		res.ExitCode = cmd.ProcessState.ExitCode()
	default:
		return res, fmt.Errorf("exec %q: %w", req.Command, err)
	}
	return res, nil
}

// exitCode is the command's exit status, or 128+signal when a signal ended it, as a shell
// reports it.
func exitCode(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
}
