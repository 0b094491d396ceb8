package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait in these tests; none is expected to come near it.
const waitTimeout = 10 * time.Second

func newClock(t *testing.T) *quartz.Mock { return quartz.NewMock(t).WithLogger(quartz.NoOpLogger) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestOrderAndAccounting(t *testing.T) {
	t.Parallel()
	q := New[int](100, newClock(t))
	for i, size := range []int64{10, 20, 30} {
		if err := q.Push(i, size); err != nil {
			t.Fatalf("Push on an open queue = %v", err)
		}
	}
	if q.Len() != 3 || q.Bytes() != 60 {
		t.Fatalf("Len, Bytes = %d, %d; want 3, 60", q.Len(), q.Bytes())
	}
	if err := q.Push(-1, 41); !errors.Is(err, ErrFull) || q.Len() != 3 {
		t.Errorf("Push past the bound = %v, Len %d; want ErrFull and nothing pushed", err, q.Len())
	}
	if v, size, ok := q.Peek(); !ok || v != 0 || size != 10 || q.Len() != 3 {
		t.Fatalf("Peek = %v, %d, %v", v, size, ok)
	}
	if v, size, ok := q.Take(); !ok || v != 0 || size != 10 || q.Bytes() != 50 {
		t.Fatalf("Take = %v, %d, %v; Bytes %d", v, size, ok, q.Bytes())
	}
	if all, closed, err := q.TakeAll(); len(all) != 2 || all[0] != 1 || all[1] != 2 || q.Bytes() != 0 || closed || err != nil {
		t.Fatalf("TakeAll = %v, %v, %v; Bytes %d", all, closed, err, q.Bytes())
	}
	if _, _, ok := q.Take(); ok {
		t.Fatal("Take on an empty queue")
	}
}

// TestEmptyQueueTakesAnyItem: an item larger than the bound fits an empty queue, or it could
// never be sent at all.
func TestEmptyQueueTakesAnyItem(t *testing.T) {
	t.Parallel()
	q := New[string](10, newClock(t))
	if err := q.Push("big", 1000); err != nil {
		t.Fatalf("an empty queue refuses a big item: %v", err)
	}
	if err := q.Push("small", 1); !errors.Is(err, ErrFull) {
		t.Fatalf("a queue past its bound takes more: %v", err)
	}
	if err := q.PushOver("over", 1); err != nil || q.Len() != 2 {
		t.Fatalf("PushOver = %v, Len %d; want it pushed past the bound", err, q.Len())
	}
}

func TestCloseKeepsWhatWaits(t *testing.T) {
	t.Parallel()
	q := New[int](100, newClock(t))
	q.Push(1, 1)
	q.Close()
	if err := q.Push(2, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Push after Close = %v, want ErrClosed", err)
	}
	if v, _, ok := q.Take(); !ok || v != 1 || !q.Closed() {
		t.Errorf("after Close: Take = %v, %v; Closed %v", v, ok, q.Closed())
	}
	select {
	case <-q.Ready():
	default:
		t.Error("Close did not signal Ready")
	}
}

func TestFailDropsAndFirstWins(t *testing.T) {
	t.Parallel()
	q := New[int](100, newClock(t))
	q.Push(1, 50)
	first, second := errors.New("first"), errors.New("second")
	if !q.Fail(first) || q.Fail(second) {
		t.Fatal("Fail did not report which call set the error")
	}
	if !errors.Is(q.Err(), first) || q.Len() != 0 || q.Bytes() != 0 {
		t.Fatalf("after Fail: Err %v, Len %d, Bytes %d", q.Err(), q.Len(), q.Bytes())
	}
	if err := q.Push(2, 1); !errors.Is(err, first) {
		t.Errorf("Push after Fail = %v, want the queue's error", err)
	}
	select {
	case <-q.Dead():
	default:
		t.Error("Dead is not closed")
	}
	if err := q.WaitRoom(context.Background(), 1, time.Minute); !errors.Is(err, first) {
		t.Errorf("WaitRoom on a failed queue = %v", err)
	}
}

// waitRoom runs PushWait in a goroutine, as a producer would, and reports its answer.
func waitRoom(q *Queue[int], ctx context.Context, size int64, stall time.Duration) <-chan error {
	out := make(chan error, 1)
	go func() { out <- q.PushWait(ctx, 0, size, stall) }()
	return out
}

func full(t *testing.T, clk quartz.Clock) *Queue[int] {
	q := New[int](100, clk)
	q.Push(1, 100)
	return q
}

// TestWaitRoomWakesEveryWaiter: one take that makes room for two waiting producers lets both
// go on, without either waiting out its stall timer.
func TestWaitRoomWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	ctx := testCtx(t)
	q := full(t, clk)
	a := waitRoom(q, ctx, 10, time.Minute)
	b := waitRoom(q, ctx, 10, time.Minute)
	for range 2 {
		call := trap.MustWait(ctx)
		if call.Duration != time.Minute {
			t.Errorf("a producer waits %s, want the stall of 1m", call.Duration)
		}
		call.MustRelease(ctx)
	}
	q.TakeAll()
	for _, c := range []<-chan error{a, b} {
		select {
		case err := <-c:
			if err != nil {
				t.Errorf("WaitRoom = %v after a take made room", err)
			}
		case <-ctx.Done():
			t.Fatal("a producer still waits after a take made room for it")
		}
	}
	if q.Len() != 2 || q.Bytes() != 20 {
		t.Errorf("Len, Bytes = %d, %d; want both pushes", q.Len(), q.Bytes())
	}
}

// TestWaitRoomStall: a producer waits the stall out, counted from the last take, and gets
// ErrStalled; the queue itself is not failed (that is the user's policy).
func TestWaitRoomStall(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	ctx := testCtx(t)
	q := full(t, clk)
	clk.Advance(20 * time.Second) // the taker has taken nothing for 20s already
	got := waitRoom(q, ctx, 10, time.Minute)
	call := trap.MustWait(ctx)
	if call.Duration != 40*time.Second {
		t.Errorf("the producer waits %s, want what is left of the stall (40s)", call.Duration)
	}
	call.MustRelease(ctx)
	clk.Advance(40 * time.Second).MustWait(ctx)
	if err := <-got; !errors.Is(err, ErrStalled) {
		t.Fatalf("WaitRoom = %v, want ErrStalled", err)
	}
	if q.Err() != nil || q.Len() != 1 {
		t.Errorf("a stall changed the queue: Err %v, Len %d", q.Err(), q.Len())
	}
}

// TestWaitRoomReleasedByFailCloseAndContext: a waiting producer returns when the queue fails
// or closes, or its context ends, with that reason.
func TestWaitRoomReleasedByFailCloseAndContext(t *testing.T) {
	t.Parallel()
	gone := errors.New("gone")
	for name, tc := range map[string]struct {
		end  func(q *Queue[int], cancel context.CancelFunc)
		want error
	}{
		"fail":    {func(q *Queue[int], _ context.CancelFunc) { q.Fail(gone) }, gone},
		"close":   {func(q *Queue[int], _ context.CancelFunc) { q.Close() }, ErrClosed},
		"context": {func(_ *Queue[int], cancel context.CancelFunc) { cancel() }, context.Canceled},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := newClock(t)
			trap := clk.Trap().NewTimer("queue", "stall")
			defer trap.Close()
			ctx := testCtx(t)
			q := full(t, clk)
			pctx, cancel := context.WithCancel(context.Background()) // no deadline: only tc.end may end it
			defer cancel()
			got := waitRoom(q, pctx, 10, time.Minute)
			trap.MustWait(ctx).MustRelease(ctx)
			tc.end(q, cancel)
			select {
			case err := <-got:
				if !errors.Is(err, tc.want) {
					t.Fatalf("WaitRoom = %v, want %v", err, tc.want)
				}
			case <-ctx.Done():
				t.Fatalf("WaitRoom still waits after %s", name)
			}
		})
	}
}

func TestIdleCountsFromTheLastTake(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	q := New[int](100, clk)
	clk.Advance(3 * time.Second)
	if q.Idle() != 3*time.Second {
		t.Fatalf("Idle = %s, want 3s since the queue was made", q.Idle())
	}
	q.Push(1, 1)
	q.Take()
	clk.Advance(time.Second)
	if q.Idle() != time.Second {
		t.Fatalf("Idle = %s, want 1s since the take", q.Idle())
	}
}

// FuzzAccounting runs a sequence of operations against a model (a slice) and checks after each
// that the queue holds the same items in the same order, and that Len and Bytes agree and Push refuses what does not fit.
func FuzzAccounting(f *testing.F) {
	f.Add([]byte{0, 10, 0, 200, 1, 2, 0, 5, 3, 0, 1, 4, 0})
	f.Add([]byte{0, 255, 0, 255, 0, 1, 2, 5, 0, 3})
	f.Add([]byte{0, 50, 0, 60, 1, 1, 1, 0, 70, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const limit = 300
		q := New[int](limit, quartz.NewReal())
		type item struct {
			v    int
			size int64
		}
		var model []item
		var closed, failed bool
		next := 0
		for i := 0; i < len(ops); i++ {
			switch ops[i] % 6 {
			case 0: // push the next byte's size, if it fits
				if i+1 >= len(ops) {
					break
				}
				i++
				size := int64(ops[i])
				var sum int64
				for _, m := range model {
					sum += m.size
				}
				fits := len(model) == 0 || sum+size <= limit
				err := q.Push(next, size)
				switch {
				case failed || closed:
					if err == nil {
						t.Fatalf("Push on a queue closed %v, failed %v was taken", closed, failed)
					}
				case !fits:
					if !errors.Is(err, ErrFull) {
						t.Fatalf("Push(%d) = %v with %d bytes waiting; want ErrFull", size, err, sum)
					}
				case err != nil:
					t.Fatalf("Push(%d) = %v with %d bytes waiting", size, err, sum)
				}
				if err == nil {
					model = append(model, item{next, size})
					next++
				}
			case 1: // take one
				v, size, ok := q.Take()
				if ok != (len(model) > 0) || ok && (v != model[0].v || size != model[0].size) {
					t.Fatalf("Take = %v, %d, %v; want %v", v, size, ok, model)
				}
				if ok {
					model = model[1:]
				}
			case 2: // take all
				all, _, _ := q.TakeAll()
				if len(all) != len(model) {
					t.Fatalf("TakeAll = %v; want %v", all, model)
				}
				for j := range all {
					if all[j] != model[j].v {
						t.Fatalf("TakeAll = %v; want %v", all, model)
					}
				}
				model = nil
			case 3: // peek
				v, size, ok := q.Peek()
				if ok != (len(model) > 0) || ok && (v != model[0].v || size != model[0].size) {
					t.Fatalf("Peek = %v, %d, %v; want %v", v, size, ok, model)
				}
			case 4:
				q.Close()
				closed = true
			case 5:
				if q.Fail(errors.New("x")) == failed {
					t.Fatal("Fail did not report whether it set the error")
				}
				failed, model = true, nil
			}
			var sum int64
			for _, m := range model {
				sum += m.size
			}
			if q.Len() != len(model) || q.Bytes() != sum {
				t.Fatalf("after op %d: Len, Bytes = %d, %d; want %d, %d", ops[i], q.Len(), q.Bytes(), len(model), sum)
			}
		}
	})
}

// TestPushIsOneStep: producers pushing at once never pass the bound between them, without
// holding any lock of their own: Push decides and appends in one step.
func TestPushIsOneStep(t *testing.T) {
	t.Parallel()
	q := New[int](100, newClock(t))
	var wg sync.WaitGroup
	var pushed atomic.Int64
	for i := range 50 {
		wg.Go(func() {
			if q.Push(i, 10) == nil {
				pushed.Add(1)
			}
		})
	}
	wg.Wait()
	if pushed.Load() != 10 || q.Bytes() != 100 {
		t.Fatalf("%d pushes of 10 bytes were taken, Bytes %d; want 10 and 100, the bound", pushed.Load(), q.Bytes())
	}
}

// TestPushWaitTakesTheRoomItWaitedFor: of two producers waiting for room that one take makes
// for only one of them, one pushes and the other waits on; the bound holds.
func TestPushWaitTakesTheRoomItWaitedFor(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	ctx := testCtx(t)
	q := full(t, clk)
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := waitRoom(q, pctx, 60, time.Minute)
	b := waitRoom(q, pctx, 60, time.Minute)
	for range 2 {
		trap.MustWait(ctx).MustRelease(ctx)
	}
	q.TakeAll()
	var loser <-chan error
	select {
	case err := <-a:
		loser = b
		if err != nil {
			t.Fatalf("PushWait = %v after a take made room", err)
		}
	case err := <-b:
		loser = a
		if err != nil {
			t.Fatalf("PushWait = %v after a take made room", err)
		}
	case <-ctx.Done():
		t.Fatal("no producer pushed after a take made room")
	}
	trap.MustWait(ctx).MustRelease(ctx) // the other waits again
	if q.Len() != 1 || q.Bytes() != 60 {
		t.Fatalf("Len, Bytes = %d, %d; want one push of 60", q.Len(), q.Bytes())
	}
	cancel()
	if err := <-loser; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting producer's PushWait = %v, want context.Canceled", err)
	}
}
