package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// TailBytes is how much of the output it saw Follow keeps: the last 64 KiB.
const TailBytes = 64 << 10

// Seen is what Follow saw of an attachment.
type Seen struct {
	Info     Info          // the process: as attached, or as its end item said once it ended
	Tail     []byte        // the last TailBytes of the output seen, from a whole character on
	TailFrom int64         // the offset Tail starts at
	Next     int64         // the offset after what was seen: pass it as since next time
	Gap      *Gap          // output after since that is no longer kept, if any
	Capped   bool          // the stream reached HANGAR_STREAM_MAX_BYTES: nothing more came
	Closed   stream.Reason // why the stream ended before the process did; "" if it did not
	Notes    []string      // for a person: each gap's note and the cap's, in the order they came
}

// Follow renders the attachment's stream with write, in order, and keeps an account of what
// it saw: it takes the replay (the kept output from since) whatever wait is, then waits for
// more until wait has passed (on the Manager's clock), the process ended or the stream ended.
// write gets each batch as a reader of text sees it: the output, a gap as its note (a text
// item of event EventGap, at the offset the gap ends: its ID), the stream's capped item and
// the process's end item (JSON). A write that fails ends Follow with its error; when ctx ends,
// the stream ends (ReasonClient) and Follow returns ctx's error.
func (a *Attachment) Follow(ctx context.Context, wait time.Duration, write stream.Write) (Seen, error) {
	f := &seeing{Seen: Seen{Info: a.Info, Next: min(a.since, a.Info.OutputEnd)}}
	f.TailFrom = f.Next
	deadline := a.clock.Now().Add(wait)
	replayEnd, exited := a.Info.OutputEnd, a.Info.State != StateRunning
	for {
		var idle time.Duration // 0: wait for the next item however long (the replay, an exited process's end)
		if f.Next >= replayEnd && !exited {
			if idle = deadline.Sub(a.clock.Now()); idle <= 0 {
				return f.result(), nil
			}
		}
		items, err := a.Stream.Next(ctx, idle)
		var ended *stream.Ended
		switch {
		case errors.Is(err, io.EOF):
			return f.result(), nil
		case errors.As(err, &ended):
			f.Closed = ended.Reason
			return f.result(), nil
		case err != nil:
			a.Stream.End(stream.ReasonClient)
			return Seen{}, err
		}
		if len(items) == 0 {
			continue
		}
		for i := range items {
			items[i] = f.take(items[i])
		}
		if err := write(items); err != nil {
			return Seen{}, err
		}
	}
}

// seeing is one Follow's account, and the whole of the tail (result cuts it to a character).
type seeing struct {
	Seen
	tail []byte
}

// take accounts for one item, and returns it as a reader of text sees it.
func (f *seeing) take(it stream.Item) stream.Item {
	switch it.Event {
	case EventGap:
		var w wire.Gap
		if json.Unmarshal(it.Data, &w) != nil {
			return it
		}
		g := Gap(w)
		f.Gap, f.Next = &g, g.To
		f.tail, f.TailFrom = nil, g.To
		f.Notes = append(f.Notes, g.Note())
		return stream.Item{Event: EventGap, ID: strconv.FormatInt(g.To, 10), Data: []byte(g.Note())}
	case EventOutput:
		off, err := strconv.ParseInt(it.ID, 10, 64)
		if err != nil {
			return it
		}
		f.tail = append(f.tail, it.Data...)
		if cut := len(f.tail) - TailBytes; cut > 0 {
			f.tail = append(f.tail[:0:0], f.tail[cut:]...)
		}
		f.Next, f.TailFrom = off, off-int64(len(f.tail))
	case EventEnd:
		var end Info
		if json.Unmarshal(it.Data, &end) == nil {
			f.Info = end
		}
	case stream.EventCapped:
		f.Capped = true
		f.Notes = append(f.Notes, fmt.Sprintf("This attach reached HANGAR_STREAM_MAX_BYTES and sent nothing more: attach again from next (%d).", f.Next))
	}
	return it
}

// result is the account, its tail cut to start on a whole character.
func (f *seeing) result() Seen {
	out, tail := f.Seen, f.tail
	// A tail cut at TailBytes may start inside a character: start it at the next one.
	for i := 0; i < utf8.UTFMax-1 && out.TailFrom > 0 && len(tail) == TailBytes && !utf8.RuneStart(tail[0]); i++ {
		tail, out.TailFrom = tail[1:], out.TailFrom+1
	}
	out.Tail = tail
	return out
}

// Note says for a person that the gap's output is gone, and why when it was not just dropped
// from the ring.
func (g Gap) Note() string {
	if g.Lost != "" {
		return fmt.Sprintf("[hangar: output from byte %d to %d is gone: %s; what follows starts at %d]", g.From, g.To, g.Lost, g.To)
	}
	return fmt.Sprintf("[hangar: output from byte %d to %d is no longer kept (hangar keeps the last 256 KiB); what follows starts at %d]", g.From, g.To, g.To)
}
