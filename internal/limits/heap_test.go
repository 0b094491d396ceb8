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
	// After collections it is kept (each one's cleanup sets it again, or leaves it).
	for range 3 {
		runtime.GC()
	}
	if p := k.Percent(); p <= 100 {
		t.Errorf("percentage %d after collections, want above 100", p)
	}
	k.Stop()
	if p := debug.SetGCPercent(100); p != 100 || k.Percent() != 100 {
		t.Fatalf("after Stop the collector's percentage is %d (the keeper says %d), want 100", p, k.Percent())
	}
	runtime.GC() // a cleanup after Stop changes nothing
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("a collection after Stop set the percentage to %d, want 100", p)
	}
}
