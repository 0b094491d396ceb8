package cli

import (
	"bufio"
	"bytes"
	"io"
)

// event is one Server-Sent Event.
type event struct {
	Name string // "" for a plain message
	ID   string
	Data []byte // the data lines, joined by "\n"
}

// sseReader reads Server-Sent Events (the WHATWG format: fields, comments, blank-line
// dispatch), a line of any length at a time.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event; io.EOF at the end of the stream (an event cut off by the end is
// dropped, as the format says), io.ErrUnexpectedEOF when the stream broke mid-event.
func (s *sseReader) next() (event, error) {
	var ev event
	var data [][]byte
	started := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && (started || len(line) > 0) {
				return event{}, io.ErrUnexpectedEOF
			}
			return event{}, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if !started {
				continue
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		started = true
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "id":
			ev.ID = string(value)
		case "data":
			data = append(data, bytes.Clone(value))
		}
	}
}

// each calls fn for each event until hangar closes the stream (its close event's reason, as
// closeError says it), the stream breaks (streamBroke{broke}: worth resuming) or fn returns an
// error.
func (s *sseReader) each(broke string, fn func(event) error) error {
	for {
		ev, err := s.next()
		if err != nil {
			return streamBroke{broke}
		}
		if ev.Name == "close" {
			return closeError(ev.Data)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}
