package benchkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ p, want float64 }{{50, 3}, {95, 5}, {100, 5}, {1, 1}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile of none = %v, want 0", got)
	}
}

// TestWriteSection: a section goes between its markers (added at the end the first time) and
// replaces what was there; the other sections stay.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	other := "# Benchmarks\n\n<!-- a:begin -->\na\n<!-- a:end -->\n"
	os.WriteFile(path, []byte(other), 0o644)
	for _, text := range []string{"first", "second"} {
		if err := WriteSection(path, "<!-- b:begin -->", "<!-- b:end -->", text); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if want := other + "\n<!-- b:begin -->\nsecond\n<!-- b:end -->\n"; string(b) != want {
		t.Errorf("README:\n%s\nwant:\n%s", b, want)
	}
	if strings.Contains(string(b), "first") {
		t.Error("the first section was not replaced")
	}
}
