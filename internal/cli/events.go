package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/hangar-dev/hangar/internal/eventtext"
	"github.com/hangar-dev/hangar/internal/wire"
)

// eventPrinter writes agent events for a person, a line per thing each says, as
// internal/eventtext reads them (the lines the Fleet page shows too), coloured by their kind.
type eventPrinter struct {
	w      io.Writer
	colour bool
}

func (p *eventPrinter) print(ev wire.Event) {
	at := ""
	if t := time.Time(ev.TS); !t.IsZero() {
		at = t.Local().Format("15:04:05")
	}
	for _, l := range p.lines(ev) {
		fmt.Fprintf(p.w, "%s  %s\n", paint(p.colour, "90", at), l)
	}
}

// lines is what one event says, a line per thing.
func (p *eventPrinter) lines(ev wire.Event) []string {
	var out []string
	for _, l := range eventtext.Lines(ev) {
		if c, ok := kindColour[l.Kind]; ok {
			l.Text = paint(p.colour, c, l.Text)
		}
		out = append(out, l.Text)
	}
	return out
}

// kindColour is the colour of a line of each kind: commands cyan, what they gave back and
// a run's start and thinking grey, results green, retries yellow, errors red, turns bold.
var kindColour = map[string]string{
	eventtext.KindTurn:       "1",
	eventtext.KindStart:      "90",
	eventtext.KindThinking:   "90",
	eventtext.KindToolCall:   "36",
	eventtext.KindToolOutput: "90",
	eventtext.KindResult:     "32",
	eventtext.KindRetry:      "33",
	eventtext.KindError:      "31",
}
