package process

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/stream"
)

// attachment is an Attachment to no process, whose stream the test feeds: clock drives both
// the stream's waits and Follow's.
func attachment(t *testing.T, clock quartz.Clock, info Info, since int64) *Attachment {
	t.Helper()
	r := stream.New(stream.Config{Clock: clock})
	st, err := r.Open(context.Background(), stream.Options{Kind: stream.KindProcess, Unpaced: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return &Attachment{Stream: st, Info: info, since: since, clock: clock}
}

// rendered is a stream.Write that keeps what it is given.
type rendered struct{ items []stream.Item }

func (r *rendered) write(items []stream.Item) error {
	for _, it := range items {
		it.Data = append([]byte(nil), it.Data...)
		r.items = append(r.items, it)
	}
	return nil
}

// TestFollowAccount: Follow renders a gap as its note, at the offset it ends; keeps the last
// TailBytes of output, cut to start on a whole character; and takes the process's state
// from its end item.
func TestFollowAccount(t *testing.T) {
	t.Parallel()
	out := strings.Repeat("€", TailBytes/3+1) // 65538 bytes: the cut at TailBytes falls inside a €
	end := 90 + int64(len(out))
	a := attachment(t, quartz.NewReal(), Info{ID: "p_1", State: StateExited, OutputEnd: end}, 10)
	gap, _ := json.Marshal(Gap{From: 10, To: 90})
	a.Stream.Send(stream.Item{Event: EventGap, JSON: true, Data: gap})
	sendOutput(a.Stream, []byte(out), 90)
	code := 3
	a.Stream.Send(endItem(Info{ID: "p_1", State: StateExited, ExitCode: &code, OutputEnd: end}))
	a.Stream.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var r rendered
	seen, err := a.Follow(ctx, 0, r.write)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.items[0]; n.Event != EventGap || n.JSON || n.ID != "90" || string(n.Data) != (Gap{From: 10, To: 90}).Note() {
		t.Errorf("first item rendered = %+v, want the gap's note at 90", n)
	}
	if seen.Gap == nil || seen.Gap.To != 90 || seen.Next != end || seen.Info.ExitCode == nil || *seen.Info.ExitCode != 3 {
		t.Errorf("seen = gap %+v, next %d, info %+v; want the gap, next %d, exit code 3", seen.Gap, seen.Next, seen.Info, end)
	}
	if want := out[3:]; string(seen.Tail) != want || seen.TailFrom != end-int64(len(want)) {
		t.Errorf("tail of %d bytes from %d, want the last %d from %d", len(seen.Tail), seen.TailFrom, len(want), end-int64(len(want)))
	}
}

// TestFollowWaitsOnTheClock: after the replay, Follow waits for more output until wait has
// passed on the Manager's clock, however long that takes on the wall's.
func TestFollowWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	idle := clock.Trap().NewTimer("stream", "idle")
	defer idle.Close()
	a := attachment(t, clock, Info{ID: "p_1", State: StateRunning}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	type result struct {
		seen Seen
		err  error
	}
	done := make(chan result, 1)
	var r rendered
	go func() {
		seen, err := a.Follow(ctx, 5*time.Second, r.write)
		done <- result{seen, err}
	}()
	call := idle.MustWait(ctx)
	if call.Duration != 5*time.Second {
		t.Errorf("waits %v for output, want 5s", call.Duration)
	}
	call.MustRelease(ctx)
	clock.Advance(5 * time.Second).MustWait(ctx)
	res := <-done
	if res.err != nil || res.seen.Next != 0 || res.seen.Closed != "" || len(r.items) != 0 {
		t.Errorf("Follow = %+v, %v, rendered %v; want nothing seen, at the wait's end", res.seen, res.err, r.items)
	}
}

// TestFollowNotesEveryGap: each gap an attach met has its note, in the order they came.
func TestFollowNotesEveryGap(t *testing.T) {
	t.Parallel()
	a := attachment(t, quartz.NewReal(), Info{ID: "p_1", State: StateExited, OutputEnd: 200}, 10)
	gaps := []Gap{{From: 10, To: 90}, {From: 95, To: 200, Lost: "hangar restarted"}}
	for i, g := range gaps {
		data, _ := json.Marshal(g)
		a.Stream.Send(stream.Item{Event: EventGap, JSON: true, Data: data})
		if i == 0 {
			sendOutput(a.Stream, []byte("hello"), 90)
		}
	}
	a.Stream.Send(endItem(Info{ID: "p_1", State: StateExited, OutputEnd: 200}))
	a.Stream.Finish()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var r rendered
	seen, err := a.Follow(ctx, 0, r.write)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{gaps[0].Note(), gaps[1].Note()}; !slices.Equal(seen.Notes, want) {
		t.Errorf("notes = %q, want %q", seen.Notes, want)
	}
}
