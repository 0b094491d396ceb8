package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/hangar-dev/hangar/internal/provider"
)

// envScript sets the working directory and the environment, which pods/exec cannot, then runs
// the rest of its arguments: sh -c envScript hangar-env DIR K=V... -- argv...
const envScript = `cd "$1" || exit 126; shift; while [ "$1" != -- ]; do export "$1"; shift; done; shift; exec "$@"`

// killTimeout bounds the exec that kills a timed-out command.
const killTimeout = 10 * time.Second

// Exec runs req.Command in the sandbox container through the pods/exec subresource (websocket,
// or SPDY on older clusters) as `bash -lc`, or `sh -c` where the image has no bash. On timeout
// it kills the command's processes with a second exec (provider.KillMarkedScript).
func (p *Provider) Exec(ctx context.Context, sb provider.Sandbox, req provider.ExecRequest) (provider.ExecResult, error) {
	if p.rest == nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: no cluster connection: %w", sb.Name, provider.ErrUnsupported)
	}
	pod, err := p.pod(ctx, sb)
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
	marker, err := provider.NewAccessToken()
	if err != nil {
		return provider.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", sb.Name, err)
	}
	marker = provider.ExecMarkerEnv + "=" + marker[:16]
	cwd := sb.Workdir
	if req.Cwd != "" {
		cwd = path.Join(sb.Workdir, req.Cwd)
		if path.IsAbs(req.Cwd) {
			cwd = req.Cwd
		}
	}
	argv := []string{"/bin/sh", "-c", envScript, "hangar-env", cwd, marker}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		argv = append(argv, k+"="+req.Env[k])
	}
	argv = append(append(argv, "--"), provider.ShellArgv(req.Command)...)

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	var stdout, stderr lockedTail
	err = p.stream(runCtx, pod, argv, &stdout, &stderr)
	res := provider.ExecResult{Stdout: stdout.take(), Stderr: stderr.take()}
	if runCtx.Err() != nil {
		p.kill(pod, marker)
		if ctx.Err() != nil {
			return res, fmt.Errorf("exec %q in sandbox %s: %w", req.Command, sb.Name, ctx.Err())
		}
		res.TimedOut, res.ExitCode = true, 128+9
		return res, nil
	}
	var exitErr utilexec.CodeExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitStatus()
	default:
		return res, fmt.Errorf("exec %q in sandbox %s: %w", req.Command, sb.Name, apiErr(err))
	}
	return res, nil
}

// stream runs argv in the pod's sandbox container, its output into stdout and stderr.
func (p *Provider) stream(ctx context.Context, pod *corev1.Pod, argv []string, stdout, stderr io.Writer) error {
	req := p.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: containerName,
		Command:   argv,
		Stdout:    true,
		Stderr:    true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.rest, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("new websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.rest, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("new spdy executor: %w", err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, websocketRefused)
	if err != nil {
		return fmt.Errorf("new executor: %w", err)
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

// websocketRefused reports whether err is the API server refusing a websocket (or a proxy
// that cannot carry one), so SPDY is tried instead. client-go's websocket transport returns
// k8s.io/streaming's UpgradeFailureError: apimachinery's older copy of the type (its
// httpstream package, deprecated) never matched it, and the fallback never happened.
func websocketRefused(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// kill SIGKILLs every process of a timed-out exec; a failure is only logged.
func (p *Provider) kill(pod *corev1.Pod, marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	var out, errOut lockedTail
	argv := []string{"/bin/sh", "-c", provider.KillMarkedScript, "hangar-kill", marker}
	if err := p.stream(ctx, pod, argv, &out, &errOut); err != nil {
		p.log.Error("kill timed-out exec", "pod", pod.Name, "err", err, "stderr", string(errOut.take()))
	}
}

// lockedTail is a TailBuffer for a stream's output. remotecommand's StreamWithContext returns
// when its context ends without waiting for the goroutines that copy the output, which may
// still write: take stops them writing and returns a copy of what was kept.
type lockedTail struct {
	mu    sync.Mutex
	buf   provider.TailBuffer
	taken bool
}

func (l *lockedTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken {
		return len(p), nil
	}
	return l.buf.Write(p)
}

func (l *lockedTail) take() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.taken = true
	return bytes.Clone(l.buf.Bytes())
}
