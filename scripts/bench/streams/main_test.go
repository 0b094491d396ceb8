package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == benchkit.RelayVerb { // the relay_floor mode runs this binary as its relay
		if err := benchkit.RelayMain(os.Args[2], os.Args[3]); err != nil {
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// TestTinyRun runs the bench end to end in a tiny configuration on the local provider, so CI
// proves the program still works. It asserts that every mode measured lines, not how fast.
func TestTinyRun(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // the program reads git from the repo
	// The binary the other test packages share, not one the program builds (as make bench has
	// it do): a link of hangar less.
	bin, err := providertest.SharedHangar()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	c := config{hangar: bin, providers: []string{"local"}, runs: 1, lines: 3, interval: 20 * time.Millisecond, scale: []int{2},
		scaleSeconds: 1, scaleDaemon: true, paceBytes: 64 << 10, throughputMiB: 1, outDir: out, readme: filepath.Join(out, "README.md"), date: "2026-01-01"}
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := runAll(ctx, c, &log); err != nil {
		t.Fatalf("runAll: %v\n%s", err, log.String())
	}
	raw, err := os.ReadFile(filepath.Join(out, "2026-01-01-streams-local.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		if m.docker {
			continue
		}
		st, ok := r.Modes[m.name]
		if !ok || st.Note != "" || st.Lines != 3 || st.Missing != 0 {
			t.Errorf("mode %s: %+v", m.name, st)
		}
	}
	for _, name := range []string{"rest_exec_stream", "mcp_exec_stream_http", "relay_floor_again"} {
		if g, ok := r.Gaps[name]; !ok || g.Pairs != 1 {
			t.Errorf("gap of %s over the relay floor: %+v, %v, want one pair", name, g, ok)
		}
	}
	if _, ok := r.Gaps["relay_floor"]; ok {
		t.Error("the relay floor has a gap over itself")
	}
	if len(r.Scale) != 2 || r.Scale[0].Via != "" || r.Scale[1].Via != "daemon" {
		t.Errorf("scale: %+v, want hangar's then the daemon's", r.Scale)
	}
	for _, s := range r.Scale {
		if s.Lines != 2*10 || s.Failed != 0 {
			t.Errorf("scale via %q: %+v", s.Via, s)
		}
	}
	if r.Pacing == nil || r.Pacing.Bytes != 64<<10 || r.Unpaced == nil || r.Unpaced.Bytes != 1<<20 {
		t.Errorf("pacing %+v, unpaced %+v", r.Pacing, r.Unpaced)
	}
	if r.Machine.Cores == 0 || r.Machine.GoVersion == "" {
		t.Errorf("machine = %+v", r.Machine)
	}
	if len(r.Load.Before) != 3 || len(r.Load.After) != 3 {
		t.Errorf("load = %+v, want the three averages before and after", r.Load)
	}
	readme, _ := os.ReadFile(c.readme)
	if !strings.Contains(string(readme), "exec(stream=true), MCP progress") || !strings.Contains(string(readme), beginMarker) ||
		!strings.Contains(string(readme), "from the daemon directly") || !strings.Contains(string(readme), "REST ") || !strings.Contains(string(readme), "(target p50 ≤ +0.05 ms: ") || !strings.Contains(string(readme), "over the relay floor's, p50 / p95 (issue 31)") || !strings.Contains(string(readme), "the floor itself, measured again ") {
		t.Errorf("README table missing:\n%s", readme)
	}
}

func TestLineReader(t *testing.T) {
	var r lineReader
	at := time.Unix(100, 0)
	r.feed("noise\nL 1 99.500000\nL 2 99.", at)
	r.feed("750000\r\nL x 1\n", at.Add(time.Second))
	if len(r.lines) != 2 || r.lines[0].i != 1 || r.lines[1].i != 2 {
		t.Fatalf("lines = %+v", r.lines)
	}
	if d := r.lines[0].at.Sub(r.lines[0].printed); d != 500*time.Millisecond {
		t.Errorf("line 1 delay = %v, want 500ms", d)
	}
	if d := r.lines[1].at.Sub(r.lines[1].printed); d != 1250*time.Millisecond {
		t.Errorf("line 2 delay = %v, want 1.25s", d)
	}
	if p := percentile([]float64{5, 1, 3, 2, 4}, 50); p != 3 {
		t.Errorf("p50 = %v", p)
	}
}
