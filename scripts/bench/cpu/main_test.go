package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == benchkit.RelayVerb { // the relay_floor subject runs this binary as its relay
		if err := benchkit.RelayMain(os.Args[2], os.Args[3]); err != nil {
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m)
}

// TestSummarise: the marginal cost is the high run's instructions over the low run's, per
// extra line; the fixed cost the low run's over idle, per stream, less its lines' marginal
// cost; with repeats, the medians.
func TestSummarise(t *testing.T) {
	c := config{streams: 2, low: 10, high: 30}
	// A stream costs 1,000 and a line 50 over an idle 10,000; the second repeat a line 70.
	runs := func(line uint64) []sample {
		return []sample{
			{Instructions: 10_000},
			{Streams: 2, LinesPerStream: 10, LinesReceived: 20, Messages: 20, Instructions: 10_000 + 2*1_000 + 2*10*line},
			{Streams: 2, LinesPerStream: 30, LinesReceived: 58, Messages: 29, Instructions: 10_000 + 2*1_000 + 2*30*line},
		}
	}
	r := &result{Runs: append(runs(50), runs(70)...)}
	summarise(c, r)
	if r.MarginalPerLine != 60 || r.FixedPerStream != 1_000 {
		t.Errorf("marginal %v, fixed %v; want 60 (the median of 50 and 70) and 1000", r.MarginalPerLine, r.FixedPerStream)
	}
	if r.LinesMissing != 4 || r.MessagesPerLine != 0.5 {
		t.Errorf("missing %d, messages a line %v; want 4 and 0.5", r.LinesMissing, r.MessagesPerLine)
	}
}

// TestTinyRun runs the bench end to end, tiny, on the subjects that start fast under
// valgrind (the relay floor and hangar-envd), so CI proves the program still works: each run
// counted instructions, every line came, the results file and the README's section are
// written. It asserts nothing of the figures.
func TestTinyRun(t *testing.T) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("SKIPPED: no valgrind on this machine; the cpu bench counts instructions with it")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // the program reads git from the repo
	bin, err := providertest.SharedHangar()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	c := config{subjects: []string{"relay_floor", "envd"}, streams: 2, low: 1, high: 3, seconds: 1, runs: 1, hangar: bin,
		outDir: out, readme: filepath.Join(out, "README.md"), date: "2026-01-01"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, c); err != nil {
		t.Fatalf("run: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "2026-01-01-cpu.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Subjects) != 2 {
		t.Fatalf("%d subjects in the results, want 2", len(rep.Subjects))
	}
	for _, s := range rep.Subjects {
		if len(s.Runs) != 3 || s.LinesMissing != 0 || s.StreamsFailed != 0 {
			t.Errorf("%s: %d runs, %d lines missing, %d streams failed (%s)", s.Name, len(s.Runs), s.LinesMissing, s.StreamsFailed, s.FirstStreamError)
		}
		for _, r := range s.Runs {
			if r.Instructions == 0 {
				t.Errorf("%s, %d lines: no instructions counted", s.Name, r.LinesPerStream)
			}
		}
	}
	readme, err := os.ReadFile(c.readme)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), beginMarker) || !strings.Contains(string(readme), "hangar-envd: the daemon's own stream") {
		t.Errorf("the README's section was not written:\n%s", readme)
	}
}
