package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
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
	}
	if since > pr.ring.end {
		out.Next = pr.ring.end
	}
	return out
}

// Attachment is an open attachment to a process: its stream carries a gap item if output
// since the offset is gone, the kept output from there, everything printed from then on, and
// an end item once the process ended (then the stream finishes).
type Attachment struct {
	Stream *stream.Stream
	Info   Info // the process as it was when attached
	pr     *proc
}

// Close detaches and closes the stream.
func (a *Attachment) Close() {
	a.pr.mu.Lock()
	delete(a.pr.subs, a.Stream)
	a.pr.mu.Unlock()
	a.Stream.Close()
}

// Attach attaches to the caller's process id from offset since. The stream counts against the
// registry's limits (kind process). The caller pumps Stream.Next and must Close.
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
		st.Send(stream.Item{Event: EventGap, JSON: true, Data: fmt.Appendf(nil, `{"from":%d,"to":%d}`, out.Gap.From, out.Gap.To)})
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
	if !pr.daemon {
		m.wakePoller(pr)
	}
	return &Attachment{Stream: st, Info: info, pr: pr}, nil
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
	if !pr.daemon {
		return fmt.Errorf("%w: input to a background process needs the sandbox's daemon, and %s has none", ErrNeedsDaemon, sb.Name)
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		send := c.SendInput
		if pr.pty {
			send = c.SendPTYInput // typed into the terminal
		}
		if err := send(ctx, envd.ByTag(pr.tag), data); err != nil {
			return m.inputError(ctx, sb, id, err)
		}
	}
	if eof && pr.pty {
		return fmt.Errorf("%w: a terminal has no end of input to close; type exit or kill it", ErrInvalid)
	}
	if eof {
		if err := c.CloseStdin(ctx, envd.ByTag(pr.tag)); err != nil {
			return m.inputError(ctx, sb, id, err)
		}
	}
	return nil
}

func (m *Manager) inputError(ctx context.Context, sb store.Sandbox, id string, err error) error {
	if errors.Is(err, envd.ErrNotFound) || errors.Is(err, envd.ErrFailedPrecondition) {
		return fmt.Errorf("%w: %s: %v", ErrExited, id, err)
	}
	return m.daemonError(ctx, sb, "input to process "+id, err)
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
	// A kill that could not be sent may be tried again.
	failed := func(err error) (Info, error) {
		pr.mu.Lock()
		pr.killed = false
		pr.mu.Unlock()
		return Info{}, err
	}
	if !pr.daemon {
		if err := m.killPolled(ctx, sb, pr); err != nil {
			return failed(err)
		}
		return pr.info(), nil
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return failed(err)
	}
	if err := c.Signal(ctx, envd.ByTag(pr.tag), envd.SIGTERM); err != nil && !errors.Is(err, envd.ErrNotFound) {
		return failed(m.daemonError(ctx, sb, "kill process "+id, err))
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(m.cfg.KillGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-pr.exited:
			return
		}
		kctx, cancel := context.WithTimeout(context.Background(), m.cfg.KillGrace)
		defer cancel()
		c.Signal(kctx, envd.ByTag(pr.tag), envd.SIGKILL)
	}()
	return pr.info(), nil
}

// Resize changes a terminal's size.
func (m *Manager) Resize(ctx context.Context, p auth.Principal, ref, id string, size envd.PTYSize) error {
	pr, sb, err := m.find(ctx, p, ref, id)
	if err != nil {
		return err
	}
	if !pr.pty {
		return fmt.Errorf("%w: %s is not a terminal", ErrInvalid, id)
	}
	c, err := m.cfg.Sandboxes.Daemon(sb)
	if err != nil {
		return err
	}
	if err := c.ResizePTY(ctx, envd.ByTag(pr.tag), size); err != nil {
		return m.inputError(ctx, sb, id, err)
	}
	return nil
}
