package process

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// waitOutput waits until process id's kept output (read by m) reaches offset end.
func waitOutput(ctx context.Context, t *testing.T, m *Manager, id string, end int64) {
	t.Helper()
	for {
		i, err := m.Get(ctx, ada, "box", id)
		if err != nil {
			t.Fatal(err)
		}
		if i.OutputEnd >= end {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("process %s's output reached %d, not %d", id, i.OutputEnd, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdoptKeepsOffsets: a process adopted after a restart carries its offsets on past every
// one given out before (the record's mark, reserved ahead of the output, so a crash keeps it
// too), and a resume from an offset before the adoption gets a gap saying output was lost
// first, never other output under the same ids.
func TestAdoptKeepsOffsets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{OffsetReserve: 16})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	// 20 bytes pass the first mark (16): the record moves to 20+16 before they are sent.
	if err := h.m.Input(ctx, ada, "box", info.ID, []byte("0123456789abcdefghi\n"), false); err != nil {
		t.Fatal(err)
	}
	waitOutput(ctx, t, h.m, info.ID, 20)
	if rec, err := h.st.GetProcess(ctx, info.ID); err != nil || rec.OutputEnd != 36 {
		t.Fatalf("the record's output mark: %d, %v; want 36", rec.OutputEnd, err)
	}
	h.m.Close() // the Manager writes nothing more as it stops: a crash leaves the same record

	m2, err := New(h.m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	m2.AdoptAll(ctx)
	got, err := m2.Get(ctx, ada, "box", info.ID)
	if err != nil || !got.Adopted || got.OutputStart != 36 || got.OutputEnd != 36 {
		t.Fatalf("adopted: %+v, %v; want its offsets to start at the record's mark, 36", got, err)
	}
	if err := m2.Input(ctx, ada, "box", info.ID, []byte("more\n"), true); err != nil {
		t.Fatal(err)
	}
	// A client that had read up to 20 resumes: a gap to 36 that says output was lost, then
	// the new output at 36..41, then the end.
	a, err := m2.Attach(ctx, ada, "box", info.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var items []stream.Item
	for {
		batch, err := a.Stream.Next(ctx, 0)
		if err != nil {
			break
		}
		items = append(items, batch...)
	}
	if len(items) < 3 || items[0].Event != EventGap {
		t.Fatalf("the resume from 20 got %+v; want a gap first", items)
	}
	var g Gap
	if err := json.Unmarshal(items[0].Data, &g); err != nil || g.From != 20 || g.To != 36 || !strings.Contains(g.Lost, "lost") {
		t.Errorf("gap %s (%v); want from 20 to 36, saying output was lost", items[0].Data, err)
	}
	var out string
	for _, it := range items[1:] {
		if it.Event != EventOutput {
			continue
		}
		if id, _ := strconv.ParseInt(it.ID, 10, 64); id <= 36 {
			t.Errorf("output id %d after the adoption; want past 36", id)
		}
		out += string(it.Data)
	}
	if last := items[len(items)-1]; out != "more\n" || last.Event != EventEnd || last.ID != "41" {
		t.Errorf("after the gap: %q, then %s %s; want more\\n, then the end at 41", out, last.Event, last.ID)
	}
	// The polling read says the same, and the record keeps where its output ended.
	if o, _, err := m2.Read(ctx, ada, "box", info.ID, 0); err != nil || o.Gap == nil || o.Gap.To != 36 || o.Gap.Lost == "" || string(o.Data) != "more\n" {
		t.Errorf("Read from 0: %+v, %v", o, err)
	}
	h.waitRecordEnded(ctx, t, info.ID)
	if rec, err := h.st.GetProcess(ctx, info.ID); err != nil || rec.OutputEnd != 41 {
		t.Errorf("the ended record's output end: %d, %v; want 41", rec.OutputEnd, err)
	}
}

// TestEndedWhileDownStaysListed: a process that ended while hangar was down (its daemon forgot
// it, its sandbox was destroyed or failed), and one that ended before, stay listed and readable
// for Retention from when hangar learns it (or from its end), with how it ended; attaching to
// one ends at once.
func TestEndedWhileDownStaysListed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// down does what happens while no Manager runs, to the process id of h.
		down       func(ctx context.Context, t *testing.T, h *harness, id string)
		state      State
		exitCode   int
		status     string
		outputEnd  int64
		beforeDown string // what the process runs
	}{
		{name: "its daemon forgot it", beforeDown: "cat", state: StateExited, exitCode: -1,
			status: "unknown: it ended while hangar was not following it", outputEnd: 1 << 20,
			down: func(ctx context.Context, t *testing.T, h *harness, id string) {
				// A daemon that never had it (the sandbox's daemon restarted).
				_, url := startDaemon(t)
				setSandbox(ctx, t, h, func(sb *store.Sandbox) { sb.DaemonURL = url })
			}},
		{name: "its sandbox was destroyed", beforeDown: "cat", state: StateExited, exitCode: -1,
			status: "unknown: its sandbox was destroyed", outputEnd: 1 << 20,
			down: func(ctx context.Context, t *testing.T, h *harness, id string) {
				setSandbox(ctx, t, h, func(sb *store.Sandbox) { sb.State = "destroyed" })
			}},
		{name: "its sandbox failed", beforeDown: "cat", state: StateLost, exitCode: -1,
			status: "lost: its sandbox failed: the daemon died", outputEnd: 1 << 20,
			down: func(ctx context.Context, t *testing.T, h *harness, id string) {
				setSandbox(ctx, t, h, func(sb *store.Sandbox) { sb.State, sb.Reason = "failed", "the daemon died" })
			}},
		{name: "it ended before the restart", beforeDown: "echo hi; exit 3", state: StateExited, exitCode: 3,
			status: "exit status 3", outputEnd: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := quartz.NewMock(t)
			clock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			h := newHarness(t, Config{Retention: 10 * time.Minute, Clock: clock})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: c.beforeDown})
			if err != nil {
				t.Fatal(err)
			}
			if c.down == nil {
				h.waitEnd(ctx, t, ada, info.ID)
				h.waitRecordEnded(ctx, t, info.ID)
			}
			h.m.Close()
			clock.Advance(5 * time.Minute) // hangar is down a while
			if c.down != nil {
				c.down(ctx, t, h, info.ID)
			}
			m2, err := New(h.m.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			m2.AdoptAll(ctx)

			check := func(i Info) {
				t.Helper()
				if i.State != c.state || i.Status != c.status || i.OutputEnd != c.outputEnd ||
					(c.state == StateExited && (i.ExitCode == nil || *i.ExitCode != c.exitCode)) || (c.state == StateLost && i.ExitCode != nil) {
					t.Errorf("the process: %+v; want %s, exit code %d, %q, output end %d", i, c.state, c.exitCode, c.status, c.outputEnd)
				}
			}
			got, err := m2.Get(ctx, ada, "box", info.ID)
			if err != nil {
				t.Fatalf("Get of a process that ended while hangar was down: %v", err)
			}
			check(got)
			a, err := m2.Attach(ctx, ada, "box", info.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, end := drainAttachment(ctx, t, a)
			a.Close()
			var ended Info
			if err := json.Unmarshal(end, &ended); err != nil {
				t.Fatalf("the attachment's end %q: %v", end, err)
			}
			check(ended)

			// Listed for Retention from when this Manager learnt it (or from its end, before).
			left := 10 * time.Minute
			if c.down == nil {
				left -= 5 * time.Minute
			}
			clock.Advance(left - time.Millisecond)
			if ps, err := m2.List(ctx, ada, "box"); err != nil || len(ps) != 1 {
				t.Fatalf("listed just before its retention ends: %+v, %v", ps, err)
			} else {
				check(ps[0])
			}
			clock.Advance(time.Millisecond)
			if ps, err := m2.List(ctx, ada, "box"); err != nil || len(ps) != 0 {
				t.Errorf("listed once its retention ended: %+v, %v", ps, err)
			}
			if _, err := m2.Get(ctx, ada, "box", info.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get once its retention ended: %v", err)
			}
		})
	}
}

// setSandbox changes the harness's sandbox "box" in the store.
func setSandbox(ctx context.Context, t *testing.T, h *harness, change func(*store.Sandbox)) {
	t.Helper()
	sb, err := h.st.GetSandbox(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	change(&sb)
	if err := h.st.UpdateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
}
