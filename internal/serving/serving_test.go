package serving_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/serving"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestInFlight: Idle waits for the last Leave; after Close nothing more enters, and what was
// in flight still counts.
func TestInFlight(t *testing.T) {
	t.Parallel()
	var f serving.InFlight
	if !closed(f.Idle()) {
		t.Fatal("a new InFlight is not idle")
	}
	for range 2 {
		if !f.Enter() {
			t.Fatal("Enter refused before Close")
		}
	}
	idle := f.Idle()
	f.Leave()
	if closed(idle) {
		t.Fatal("idle with one still in flight")
	}
	f.Close()
	if f.Enter() {
		t.Fatal("Enter admitted after Close")
	}
	f.Leave()
	if !closed(idle) || !closed(f.Idle()) {
		t.Fatal("not idle once the last left")
	}
}

// deadlines is a ResponseWriter that records the write deadlines set on it.
type deadlines struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlines) SetWriteDeadline(at time.Time) error {
	d.set = append(d.set, at)
	return nil
}

// TestWriteDeadline: the deadline moves on only once a thirtieth of the timeout has passed.
func TestWriteDeadline(t *testing.T) {
	t.Parallel()
	w := &deadlines{ResponseRecorder: httptest.NewRecorder()}
	d := serving.WriteDeadline{Set: http.NewResponseController(w).SetWriteDeadline, Timeout: 30 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second, 1100 * time.Millisecond, 2 * time.Second, 2200 * time.Millisecond} {
		d.Arm(t0.Add(at))
	}
	want := []time.Time{t0.Add(30 * time.Second), t0.Add(31100 * time.Millisecond), t0.Add(32200 * time.Millisecond)}
	if len(w.set) != len(want) {
		t.Fatalf("deadlines set %v, want %v", w.set, want)
	}
	for i := range want {
		if !w.set[i].Equal(want[i]) {
			t.Errorf("deadline %d = %v, want %v", i, w.set[i], want[i])
		}
	}
}

// TestGrowStack: a handler behind GrowStack runs on a stack of 32 KiB, where one without it
// has the 2 to 8 KiB a new goroutine starts with. Measured as the stacks in use of goroutines
// held inside the handler; not parallel, so no other test's goroutines come and go meanwhile,
// and with the collector off, which would shrink the held goroutines' stacks (they use little
// of them while they wait).
func TestGrowStack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const n = 64
	inUse := func(h func(http.Handler) http.Handler) uint64 {
		release := make(chan struct{})
		var inside, done sync.WaitGroup
		inside.Add(n)
		held := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			inside.Done()
			<-release
		})
		var before, during runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			done.Go(func() {
				h(held).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			})
		}
		inside.Wait()
		runtime.ReadMemStats(&during)
		close(release)
		done.Wait()
		return during.StackInuse - before.StackInuse
	}
	plain := inUse(func(h http.Handler) http.Handler { return h })
	grown := inUse(serving.GrowStack)
	if perGoroutine := (int64(grown) - int64(plain)) / n; perGoroutine < 24<<10 {
		t.Errorf("GrowStack's goroutines hold %d bytes of stack each more than plain ones (%d and %d in all); want at least 24 KiB more (a 32 KiB stack)", perGoroutine, grown, plain)
	}
}
