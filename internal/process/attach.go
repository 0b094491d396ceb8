package process

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Output is kept output read from an offset.
type Output struct {
	Data []byte
	Gap  *Gap  // output before Data that is no longer kept, if any
	Next int64 // the offset after Data: pass it as since next time
}

// checkSince refuses offsets that cannot be. A since past the end is allowed: it reads
// nothing now and, attached, waits for output from the end on (it is not remembered).
func checkSince(since int64) error {
	if since < 0 {
		return fmt.Errorf("%w: since must be a byte offset, 0 or more", ErrInvalid)
	}
	return nil
}

// Read returns the kept output from since (for clients that poll), with the process.
func (m *Manager) Read(ctx context.Context, p auth.Principal, ref, id string, since int64) (Output, Info, error) {
	if err := checkSince(since); err != nil {
		return Output{}, Info{}, err
	}
	pr, _, err := m.find(ctx, p, ref, id)
	if err != nil {
		return Output{}, Info{}, err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return readLocked(pr, since), pr.infoLocked(), nil
}

func readLocked(pr *proc, since int64) Output {
	data, gapFrom, gapTo := pr.ring.read(since)
	out := Output{Data: data, Next: max(since, pr.ring.end)}
	if gapTo > gapFrom {
		out.Gap = &Gap{From: gapFrom, To: gapTo}
		if gapFrom < pr.adoptedAt {
			out.Gap.Lost = pr.lostNote
		}
	}
	if since > pr.ring.end {
		out.Next = pr.ring.end
	}
	return out
}

// OffsetSince is the offset of the process's kept output that was printed in the last ago (to
// within a second, never less): pass it as since to Read or Attach, as kubectl logs --since
// does. Output older than what is kept is not there to read: that gives the oldest kept.
func (m *Manager) OffsetSince(ctx context.Context, p auth.Principal, ref, id string, ago time.Duration) (int64, error) {
	if ago < 0 {
		return 0, fmt.Errorf("%w: a time back must be 0 or more", ErrInvalid)
	}
	pr, _, err := m.find(ctx, p, ref, id)
	if err != nil {
		return 0, err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.ring.offsetAt(m.cfg.Clock.Now().Add(-ago)), nil
}

// ReadNext returns the kept output from where the caller's last ReadNext of this process ended
// (the first: from the oldest output kept), with the process, and moves the caller's position
// past it: a client that polls reads each byte once. Positions are kept per token, with the
// process; concurrent calls of one token return no output twice.
func (m *Manager) ReadNext(ctx context.Context, p auth.Principal, ref, id string) (Output, Info, error) {
	pr, _, err := m.find(ctx, p, ref, id)
	if err != nil {
		return Output{}, Info{}, err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closedBy[p.TokenID] {
		return Output{}, Info{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	out := readLocked(pr, pr.cursors[p.TokenID])
	pr.cursors[p.TokenID] = out.Next
	return out, pr.infoLocked(), nil
}

// Locate returns the sandbox of the caller's process id, if this Manager follows it (a process
// started before a restart and not adopted yet is found only with its sandbox).
func (m *Manager) Locate(p auth.Principal, id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.procs[id]
	if !ok || !mine(p, pr) {
		return "", false
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closedBy[p.TokenID] {
		return "", false
	}
	return pr.sandbox, true
}

// CloseTerminal kills the caller's process id (see Kill) and closes it for the caller's
// ReadNext and Locate: they no longer find it (List and Attach still do, until it is forgotten).
func (m *Manager) CloseTerminal(ctx context.Context, p auth.Principal, ref, id string) (Info, error) {
	info, err := m.Kill(ctx, p, ref, id)
	if err != nil {
		return info, err
	}
	pr, _, err := m.find(ctx, p, ref, id)
	if err != nil {
		return info, nil // forgotten meanwhile
	}
	pr.mu.Lock()
	delete(pr.cursors, p.TokenID)
	pr.closedBy[p.TokenID] = true
	pr.mu.Unlock()
	return info, nil
}

// Attachment is an open attachment to a process: its stream carries a gap item if output
// since the offset is gone, the kept output from there, everything printed from then on, and
// an end item once the process ended (then the stream finishes).
type Attachment struct {
	Stream *stream.Stream
	Info   Info // the process as it was when attached
	pr     *proc
	since  int64
	clock  quartz.Clock
}

// Close detaches and closes the stream.
func (a *Attachment) Close() {
	a.pr.mu.Lock()
	delete(a.pr.subs, a.Stream)
	a.pr.mu.Unlock()
	a.Stream.Close()
}

// Attach attaches to the caller's process id from offset since. The stream counts against the
// registry's limits (kind process). The caller renders Stream (or Follows the attachment) and
// must Close it.
func (m *Manager) Attach(ctx context.Context, p auth.Principal, ref, id string, since int64) (*Attachment, error) {
	if err := checkSince(since); err != nil {
		return nil, err
	}
	pr, sb, err := m.find(ctx, p, ref, id)
	if err != nil {
		return nil, err
	}
	st, err := m.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindProcess, Principal: p, Sandbox: sb.Name})
	if err != nil {
		return nil, err
	}
	// Replay and subscribe under the process's lock: the follower's next output goes after
	// what is replayed here, so nothing is missed or repeated.
	pr.mu.Lock()
	out := readLocked(pr, since)
	if out.Gap != nil {
		gap, _ := json.Marshal(wire.Gap(*out.Gap))
		st.Send(stream.Item{Event: EventGap, JSON: true, Data: gap})
	}
	sendOutput(st, out.Data, out.Next-int64(len(out.Data)))
	info := pr.infoLocked()
	if pr.state != StateRunning {
		st.Send(endItem(info))
		st.Finish()
	} else {
		pr.subs[st] = struct{}{}
	}
	pr.mu.Unlock()
	pr.f.attached()
	return &Attachment{Stream: st, Info: info, pr: pr, since: since, clock: m.cfg.Clock}, nil
}

// Input writes to the process's standard input; eof closes it after.
func (m *Manager) Input(ctx context.Context, p auth.Principal, ref, id string, data []byte, eof bool) error {
	pr, sb, err := m.find(ctx, p, ref, id)
	if err != nil {
		return err
	}
	if pr.info().State != StateRunning {
		return fmt.Errorf("%w: %s takes no more input", ErrExited, id)
	}
	return pr.f.input(ctx, sb, data, eof)
}

// Kill sends SIGTERM to the process's group, and SIGKILL KillGrace later if it still runs.
// It returns at once.
func (m *Manager) Kill(ctx context.Context, p auth.Principal, ref, id string) (Info, error) {
	pr, sb, err := m.find(ctx, p, ref, id)
	if err != nil {
		return Info{}, err
	}
	pr.mu.Lock()
	if pr.state != StateRunning {
		info := pr.infoLocked()
		pr.mu.Unlock()
		return info, nil // already gone: nothing to do
	}
	already := pr.killed
	pr.killed = true
	pr.mu.Unlock()
	if already {
		return pr.info(), nil
	}
	if err := m.kill(ctx, sb, pr); err != nil {
		// A kill that could not be sent may be tried again.
		pr.mu.Lock()
		pr.killed = false
		pr.mu.Unlock()
		return Info{}, err
	}
	return pr.info(), nil
}

// Resize changes a terminal's size.
func (m *Manager) Resize(ctx context.Context, p auth.Principal, ref, id string, size PTYSize) error {
	pr, sb, err := m.find(ctx, p, ref, id)
	if err != nil {
		return err
	}
	if !pr.pty {
		return fmt.Errorf("%w: %s is not a terminal", ErrInvalid, id)
	}
	return pr.f.resize(ctx, sb, size)
}
