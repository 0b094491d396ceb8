package sandbox_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
)

// cutter passes loopback connections on to a daemon until cut, which drops them all at once as
// a killed daemon's would be.
type cutter struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutter(t *testing.T, to string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to}
	c.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			c.wg.Go(func() { io.Copy(out, in); out.Close() })
			c.wg.Go(func() { io.Copy(in, out); in.Close() })
		}
	})
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) cut() {
	c.ln.Close()
	c.mu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// destroyingProvider is a provider whose Destroy kills the daemon (cuts its connections) and
// whose Get, asked after that, no longer has the sandbox — but answers only once let go, so a
// check that began before the destroy was stored ends after it.
type destroyingProvider struct {
	provider.Provider
	daemon *cutter
	answer chan struct{}
}

func (destroyingProvider) Name() string { return "local" }
func (p destroyingProvider) Get(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	select {
	case <-p.answer:
	case <-ctx.Done():
		return provider.Sandbox{}, ctx.Err()
	}
	return provider.Sandbox{}, provider.ErrNotFound
}
func (p destroyingProvider) Destroy(context.Context, provider.Sandbox) error {
	p.daemon.cut()
	return nil
}

// TestDestroyedStaysDestroyed: a sandbox destroyed while a command runs in it through its daemon
// stays destroyed. The command's stream breaks as the daemon dies, and the check of the sandbox
// that follows (its provider no longer has it: "failed") must not be stored over the destroy —
// before, it was, and the destroyed sandbox was listed again as failed.
func TestDestroyedStaysDestroyed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopDaemon := context.WithCancel(context.Background())
	served := make(chan error, 1)
	// HOME is the daemon's folder, as the local provider's daemon has it: a command's login
	// shell does not read the host user's profile (on a developer's machine, a dozen processes).
	home := t.TempDir()
	go func() {
		served <- daemon.New(daemon.Config{AccessToken: "secret", Workdir: home, OwnHome: home}).Serve(dctx, ln)
	}()
	t.Cleanup(func() { stopDaemon(); <-served })
	prov := destroyingProvider{daemon: newCutter(t, ln.Addr().String()), answer: make(chan struct{})}
	st := newStore(t)
	now := time.Now()
	if err := st.CreateSandbox(ctx, store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: "http://" + prov.daemon.ln.Addr().String(), DaemonToken: "secret", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	m := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": prov}})
	t.Cleanup(m.Close)
	sb, err := m.Lookup(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		var once sync.Once
		_, err := m.ExecStream(ctx, sb, sandbox.ExecRequest{Command: "echo started; exec sleep 600"}, func(string, []byte) { once.Do(func() { close(started) }) })
		ran <- err
	}()
	select {
	case <-started:
	case err := <-ran:
		t.Fatalf("the command ended before the destroy: %v", err)
	}
	if err := m.Destroy(ctx, ada, "box"); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	close(prov.answer)
	err = <-ran
	var died *sandbox.DiedError
	if !errors.As(err, &died) {
		t.Fatalf("the command's error is %v, want a DiedError", err)
	}
	if died.State != string(provider.StateDestroyed) {
		t.Errorf("the DiedError says the sandbox is %s, want destroyed", died.State)
	}
	if got, err := st.GetSandbox(ctx, "box"); err != nil || got.State != string(provider.StateDestroyed) {
		t.Errorf("the sandbox is %s (%q, %v), want destroyed", got.State, got.Reason, err)
	}
	m.Reconcile(ctx)
	if got, err := st.GetSandbox(ctx, "box"); err != nil || got.State != string(provider.StateDestroyed) {
		t.Errorf("after Reconcile the sandbox is %s (%v), want destroyed", got.State, err)
	}
}

// deletedWhileMade is a provider under which the sandbox is deleted while it makes it.
type deletedWhileMade struct {
	*fake
	st store.Store
}

func (p deletedWhileMade) Create(ctx context.Context, spec provider.Spec) (provider.Sandbox, error) {
	row, err := p.st.GetSandbox(ctx, spec.Name)
	if err != nil {
		return provider.Sandbox{}, err
	}
	row.State = string(provider.StateDestroyed)
	if err := p.st.UpdateSandbox(ctx, row); err != nil {
		return provider.Sandbox{}, err
	}
	return p.fake.Create(ctx, spec)
}

// TestDeletedWhileMade: a sandbox deleted while its provider made it stays destroyed, and what
// the provider made goes too; before, the create stored it running again.
func TestDeletedWhileMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	f := newFake("local")
	m := sandbox.New(sandbox.Config{Store: st, Providers: map[string]provider.Provider{"local": deletedWhileMade{f, st}}})
	t.Cleanup(m.Close)
	if _, err := m.Create(ctx, ada, sandbox.CreateRequest{Name: "box"}); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("Create = %v, want ErrState", err)
	}
	if got, _ := st.GetSandbox(ctx, "box"); got.State != string(provider.StateDestroyed) {
		t.Errorf("the sandbox is %s, want destroyed", got.State)
	}
	if !f.called("Destroy", "box") {
		t.Error("what the provider made was not destroyed")
	}
}
