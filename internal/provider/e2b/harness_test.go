package e2b

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
)

// TestHarnessUploaded: with HarnessBinary set, Create puts hangar into the sandbox through its
// envd's files API (a real daemon behind the fake), executable, names it in Data["harness"],
// and it runs a turn there: `hangar harness` writes its run log and status file.
func TestHarnessUploaded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)
	dest := filepath.Join(t.TempDir(), "opt", "hangar", "bin", "hangar")
	p := newTestProvider(t, f, func(c *Config) { c.HarnessBinary = hangarBin; c.HarnessPath = dest })
	sb, err := p.Create(ctx, provider.Spec{Name: "turns", Owner: "ada"})
	if err != nil || sb.State != provider.StateRunning {
		t.Fatalf("Create = %+v, %v", sb, err)
	}
	defer p.Destroy(ctx, sb)
	if sb.Data["harness"] != dest {
		t.Errorf("Data[harness] = %q, want %q", sb.Data["harness"], dest)
	}
	if got, err := p.Get(ctx, sb); err != nil || got.Data["harness"] != dest {
		t.Errorf("Get's Data[harness] = %q, %v; want %q (kept at E2B, in the metadata)", got.Data["harness"], err, dest)
	}
	want, _ := os.ReadFile(hangarBin)
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the sandbox's hangar: %d bytes, %v; want the %d of %s", len(got), err, len(want), hangarBin)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o755 {
		t.Errorf("the sandbox's hangar is %v, want 0755", fi.Mode())
	}
	// A turn through the sandbox's daemon.
	dir := t.TempDir()
	c, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken, Protocol: envd.ProtocolHTTP1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Start(ctx, envd.StartRequest{Cmd: dest, Args: []string{"harness", "--run-log", filepath.Join(dir, "run.log"),
		"--status-file", filepath.Join(dir, "status.json"), "--prompt", `{"type":"hello"}`, "--", "/bin/echo", "{prompt}"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for {
		ev, err := ps.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == envd.EventEnd {
			if ev.Exit.Code != 0 {
				t.Fatalf("the harness ended %+v", ev.Exit)
			}
			break
		}
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "run.log")); string(log) != "{\"type\":\"hello\"}\n" {
		t.Errorf("run log %q", log)
	}
	if st, _ := os.ReadFile(filepath.Join(dir, "status.json")); !strings.Contains(string(st), `"exit_code":0`) {
		t.Errorf("status file %s", st)
	}
}

// TestHarnessMissing: a HarnessBinary that cannot be read leaves the sandbox failed, saying why.
func TestHarnessMissing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFake(t)
	p := newTestProvider(t, f, func(c *Config) {
		c.HarnessBinary = filepath.Join(t.TempDir(), "nope")
		c.HarnessPath = filepath.Join(t.TempDir(), "hangar")
	})
	sb, err := p.Create(ctx, provider.Spec{Name: "noharness", Owner: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy(ctx, sb)
	if sb.State != provider.StateFailed || !strings.Contains(sb.Reason, "harness") {
		t.Errorf("Create = %s (%q), want failed, saying the harness could not be put in", sb.State, sb.Reason)
	}
}
