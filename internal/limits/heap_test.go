package limits

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestKeepHeadroom: with a small live heap the collector's percentage is raised so that the
// heap may grow by the headroom; stopped, it is 100 again; an operator's GOGC is left alone.
func TestKeepHeadroom(t *testing.T) {
	t.Setenv("GOGC", "200")
	if k := KeepHeadroom(64 << 20); k != nil {
		k.Stop()
		t.Fatal("kept a headroom though GOGC is set")
	}
	t.Setenv("GOGC", "")       // as unset
	k := KeepHeadroom(1 << 30) // far above this test binary's live heap
	if k == nil {
		t.Fatal("KeepHeadroom = nil with GOGC unset")
	}
	defer debug.SetGCPercent(100)
	if p := k.Percent(); p <= 100 {
		t.Fatalf("percentage %d with a live heap far below the headroom, want above 100", p)
	}
	if got := debug.SetGCPercent(k.Percent()); got != k.Percent() {
		t.Errorf("the collector's percentage is %d, want %d", got, k.Percent())
	}
	// After a collection it is adjusted again (the cleanup runs after it), and after a stop
	// set back: wait for that by collecting until it is.
	k.Stop()
	for range 100 {
		runtime.GC()
		if p := debug.SetGCPercent(-1); debug.SetGCPercent(p) == -1 && p == 100 {
			return
		}
	}
	t.Fatal("the percentage is not 100 again after Stop and 100 collections")
}
