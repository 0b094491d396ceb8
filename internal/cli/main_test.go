package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/cli"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the built hangar: the server the tests start and the client they drive.
var hangarBin string

// waitTimeout bounds every wait of these tests.
const waitTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	var err error
	if hangarBin, err = providertest.SharedHangar(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	// The in-process client runs (hangar) leave kept-alive connections, each with goroutines.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// server is a `hangar serve` process on a fixed loopback port, restartable on it.
type server struct {
	url, addr, dir string
	admin          string
	proc           *providertest.Serve
}

// lazyServer is a server started on first use.
type lazyServer struct {
	once sync.Once
	s    *server
	err  error
}

// shared is the server the tests that need no restart share.
var shared lazyServer

func (sh *lazyServer) stop() {
	if sh.s != nil {
		sh.s.stop()
		os.RemoveAll(sh.s.dir)
	}
}

func sharedServer(t *testing.T) *server {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "hangar-cli-test-")
		if err != nil {
			shared.err = err
			return
		}
		shared.s, shared.err = newServer(dir)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// newServer starts hangar serve on a free port with its data in dir.
func newServer(dir string, args ...string) (*server, error) {
	proc, err := providertest.NewServe(hangarBin, dir, append([]string{"--session-poll-seconds", "1"}, args...)...)
	if err != nil {
		return nil, err
	}
	s := &server{addr: proc.Addr, url: proc.URL, dir: dir, proc: proc}
	if err := s.start(); err != nil {
		return nil, err
	}
	if s.admin, err = proc.AdminToken(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// start starts the server again, on its port, and waits until it is ready.
func (s *server) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return s.proc.Start(ctx)
}

func (s *server) stop() { s.proc.Stop() }

// api sends a request to the server as the admin and decodes the answer.
func (s *server) api(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	return s.proc.API(t, method, path, s.admin, body)
}

// sandbox makes a local sandbox for one test, deleted when it ends.
func (s *server) sandbox(t *testing.T, name string) {
	t.Helper()
	s.api(t, "POST", "/api/sandboxes", `{"name": "`+name+`"}`)
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", s.url+"/api/sandboxes/"+name, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
		}
	})
}

// env is the environment of a client run against s: its URL and admin token, and a config
// folder of the test's own.
func (s *server) env(t *testing.T, extra ...string) []string {
	cfg := t.TempDir()
	env := []string{"HANGAR_URL=" + s.url, "HANGAR_TOKEN=" + s.admin, "XDG_CONFIG_HOME=" + cfg, "HOME=" + cfg, "PATH=" + os.Getenv("PATH")}
	return append(env, extra...)
}

// result is what a client run printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// hangar runs the client with env and stdin, and waits for it. It runs in the test's process,
// as cmd/hangar runs it (cli.NewRoot, cli.Execute), with env as its whole environment: a
// hangar process costs ~170 ms of CPU to start (its packages' init), ~60 such runs a test
// run. The runs that need a process of their own (signals, a terminal, reading while it runs)
// use startHangar.
func hangar(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	root := cli.NewRoot(cli.Config{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: getenv(env)})
	code := cli.Execute(ctx, root, args)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// getenv reads a variable of env (KEY=value lines), the last one set winning as in a process.
func getenv(env []string) func(string) string {
	return func(key string) string {
		v := ""
		for _, kv := range env {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v = val
			}
		}
		return v
	}
}

// want fails the test unless r exited code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %q\nstderr: %q", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// background is a client run that the test reads from while it runs.
type background struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *providertest.SyncBuffer
	done   chan struct{}
	code   int
}

func startHangar(t *testing.T, env []string, args ...string) *background {
	t.Helper()
	cmd := exec.Command(hangarBin, args...)
	cmd.Env = env
	pr, pw := io.Pipe()
	b := &background{cmd: cmd, stdout: bufio.NewReader(pr), stderr: &providertest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = pw, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		b.code = cmd.ProcessState.ExitCode()
		_ = err
		pw.Close()
		close(b.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		pr.Close() // output nobody read must not hold up Wait's copying
		<-b.done
	})
	return b
}

// line reads the next line of the run's stdout, failing after waitTimeout.
func (b *background) line(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		l, _ := b.stdout.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(waitTimeout):
		t.Fatalf("no line from hangar; stderr: %s", b.stderr.String())
		return ""
	}
}

// wait waits for the run to end and returns its exit code.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
		return b.code
	case <-time.After(waitTimeout):
		t.Fatalf("hangar did not end; stderr: %s", b.stderr.String())
		return 0
	}
}

// rest reads what is left of stdout until the run ends.
func (b *background) rest(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		rest, _ := io.ReadAll(b.stdout) // EOF once the run ended and its output was copied
		got <- string(rest)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(waitTimeout):
		t.Fatalf("hangar did not end; stderr: %s", b.stderr.String())
		return ""
	}
}

// eventually polls cond until it holds, failing after waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
