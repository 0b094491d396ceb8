package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hangar-dev/hangar/internal/provider"
)

// killTimeout bounds the exec that kills a timed-out command, and the wait for its exit code.
const killTimeout = 10 * time.Second

// Exec runs req.Command through `docker exec` as `bash -lc`, or `sh -c` where the image has no
// bash. On timeout it kills every process of the command (found by a marker in their
// environment: provider.KillMarkedScript) and reports TimedOut.
func (p *Provider) Exec(ctx context.Context, sb provider.Sandbox, req provider.ExecRequest) (provider.ExecResult, error) {
	info, err := p.inspect(ctx, sb)
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
	if info.State != nil && info.State.Paused {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: it is paused", sb.Name)
	}
	marker, err := provider.NewAccessToken()
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
	marker = marker[:16]
	env := []string{provider.ExecMarkerEnv + "=" + marker}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		env = append(env, k+"="+req.Env[k])
	}
	cwd := req.Cwd
	if cwd != "" && !path.IsAbs(cwd) {
		cwd = path.Join(sb.Workdir, cwd)
	}
	created, err := p.cli.ContainerExecCreate(ctx, info.ID, container.ExecOptions{
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   cwd,
		Cmd:          provider.ShellArgv(req.Command),
	})
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, engineErr(err))
	}
	attach, err := p.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, engineErr(err))
	}
	defer attach.Close()

	var stdout, stderr provider.TailBuffer
	copied := make(chan error, 1)
	// The copy goroutine ends when the command's streams end, or when attach is closed.
	go func() {
		_, err := stdcopy.StdCopy(&stdout, &stderr, attach.Reader)
		copied <- err
	}()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := p.cfg.Clock.NewTimer(req.Timeout, "docker", "exec", "timeout")
		defer t.Stop()
		timeout = t.C
	}
	var res provider.ExecResult
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-timeout:
		res.TimedOut = true
	case <-ctx.Done():
	}
	if res.TimedOut || ctx.Err() != nil {
		p.killExec(info.ID, marker)
		attach.Close()
		<-copied
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		if ctx.Err() != nil {
			return res, fmt.Errorf("exec %q in sandbox %s: %w", req.Command, sb.Name, ctx.Err())
		}
		res.ExitCode = 128 + 9
		return res, nil
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if copyErr != nil && !errors.Is(copyErr, io.EOF) {
		return res, fmt.Errorf("exec %q in sandbox %s: read output: %w", req.Command, sb.Name, copyErr)
	}
	code, err := p.exitCode(ctx, created.ID)
	if err != nil {
		return res, fmt.Errorf("exec %q in sandbox %s: %w", req.Command, sb.Name, err)
	}
	res.ExitCode = code
	return res, nil
}

// exitCode waits for the engine to record the exec's end: its output can end a moment before.
func (p *Provider) exitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	for {
		insp, err := p.cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return 0, fmt.Errorf("inspect exec: %w", engineErr(err))
		}
		if !insp.Running {
			return insp.ExitCode, nil
		}
		t := p.cfg.Clock.NewTimer(10*time.Millisecond, "docker", "exec", "exit")
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("inspect exec: still running after its output ended: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// killExec kills, with a second exec, every process in the container whose environment holds
// the marker. A failure is logged: the caller reports the timeout either way.
func (p *Provider) killExec(containerID, marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	created, err := p.cli.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", provider.KillMarkedScript, "hangar-kill", provider.ExecMarkerEnv + "=" + marker},
	})
	if err == nil {
		err = p.cli.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{})
	}
	if err == nil {
		_, err = p.exitCode(ctx, created.ID)
	}
	if err != nil {
		p.log.Error("kill timed-out exec", "container", containerID, "err", err)
	}
}
