package limits

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// liveHeap is the runtime's measure of the heap the last collection found live.
const liveHeap = "/gc/heap/live:bytes"

// KeepHeadroom has the garbage collector let the heap grow by at least headroom bytes past
// what the last collection found live before it collects again. GOGC alone (100: collect once
// the heap has grown by what is live) makes a process with a small live heap collect after
// every few megabytes it allocates, and every collection scans every goroutine's stack and
// shrinks the idle ones, which grow again by copying when they next run: on a replica of
// hangar with a few MiB live, most of what a call costs (bench/README.md). After each
// collection it sets the collector's percentage to max(100, headroom ÷ live × 100); a large
// live heap is left at 100 (GOGC's default), so the headroom adds at most headroom bytes to
// the heap, and GOMEMLIMIT, when set, still caps it.
//
// An operator's GOGC wins: when the environment sets it, or headroom <= 0, nothing is changed.
// It returns nil then. Stop ends it (tests; a server keeps it).
func KeepHeadroom(headroom int64) *Headroom {
	if os.Getenv("GOGC") != "" || headroom <= 0 {
		return nil
	}
	k := &Headroom{headroom: headroom, sample: []metrics.Sample{{Name: liveHeap}}}
	k.percent.Store(100)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.adjust()
	k.arm()
	return k
}

// Headroom is KeepHeadroom's keeper.
type Headroom struct {
	headroom int64
	percent  atomic.Int64 // what the collector's percentage was last set to

	mu      sync.Mutex // held while the percentage is set: Stop's wins
	stopped bool
	sample  []metrics.Sample
}

// Percent is the collector's percentage as last set.
func (k *Headroom) Percent() int { return int(k.percent.Load()) }

// Stop gives the collector its percentage of 100 back, now, for good.
func (k *Headroom) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	debug.SetGCPercent(100)
	k.percent.Store(100)
}

// arm makes an object that nothing keeps, whose cleanup, run after the next collection finds
// it unreachable, adjusts the percentage and arms again.
func (k *Headroom) arm() {
	sentinel := new([16]byte) // not tiny-allocated: a tiny block could keep it with others
	runtime.AddCleanup(sentinel, func(k *Headroom) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.stopped {
			return
		}
		k.adjust()
		k.arm()
	}, k)
}

// adjust sets the percentage for the live heap, when it moved by more than an eighth. k.mu is
// held.
func (k *Headroom) adjust() {
	metrics.Read(k.sample)
	if k.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	live := max(int64(k.sample[0].Value.Uint64()), 1<<20)
	percent := max(100, k.headroom*100/live)
	if was := k.percent.Load(); percent-was > was/8 || was-percent > was/8 {
		debug.SetGCPercent(int(percent))
		k.percent.Store(percent)
	}
}
