package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
