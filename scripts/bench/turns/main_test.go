package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ p, want float64 }{{50, 3}, {95, 5}, {100, 5}, {1, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
}

// TestWriteReadmeKeepsOtherSections: the turns section goes between its markers (added at the
// end the first time); the streams section and the rest stay as they were.
func TestWriteReadmeKeepsOtherSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	other := "# Benchmarks\n\n<!-- streams:begin -->\nstreams table\n<!-- streams:end -->\n"
	os.WriteFile(path, []byte(other), 0o644)
	r := report{Provider: "docker", Modes: map[string]*modeResult{"sse_following": {Runs: 1, LinesPerRun: 99, DelayP50Ms: 2.5}}}
	for i := 0; i < 2; i++ { // twice: the second replaces the first
		if err := writeReadme(path, []report{r}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	s := string(b)
	if !strings.HasPrefix(s, other) || strings.Count(s, beginMarker) != 1 || strings.Count(s, "2.50 /") != 1 {
		t.Errorf("README:\n%s", s)
	}
	if !strings.Contains(s, "MCP subscriber | not measured yet") {
		t.Errorf("no slot for the MCP subscriber:\n%s", s)
	}
}
