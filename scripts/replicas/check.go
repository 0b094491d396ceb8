package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// outputCheck follows one background process's output as an attacher sees it over all its
// reattachments, the process printing 1, 2, 3... a line each: every output event's bytes must
// start where the last one ended (its id is the offset just past it), unless a gap event came
// between them, which says where the output goes on; and the lines must count up by one, but
// after a gap, where they may jump forward (what was lost), never back.
type outputCheck struct {
	next     int64  // the offset the next output must start at
	partial  string // an unfinished line
	skipping bool   // after a gap: drop bytes up to the next newline (a line cut by the gap)
	jumped   bool   // a gap came since the last whole line
	last     int    // the last whole line's number
	gaps     int
	lost     int // lines skipped by gaps
	problems []string
	ended    bool
	end      string // the end event's data
}

func (c *outputCheck) problem(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// event takes one SSE event of the attach stream.
func (c *outputCheck) event(id, name string, data []byte) {
	switch name {
	case "output":
		var o struct {
			Data     string `json:"data"`
			Encoding string `json:"encoding"`
		}
		if err := json.Unmarshal(data, &o); err != nil {
			c.problem("an output event that is not JSON: %.100s", data)
			return
		}
		b := []byte(o.Data)
		if o.Encoding == "base64" {
			b, _ = base64.StdEncoding.DecodeString(o.Data)
		}
		end, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			c.problem("an output event with id %q", id)
			return
		}
		start := end - int64(len(b))
		switch {
		case start < c.next:
			c.problem("output %d..%d repeats offsets before %d", start, end, c.next)
		case start > c.next:
			c.problem("output %d..%d skips offsets %d..%d without a gap", start, end, c.next, start)
		}
		c.next = end
		c.text(string(b))
	case "gap":
		var g struct {
			From int64 `json:"from"`
			To   int64 `json:"to"`
		}
		json.Unmarshal(data, &g)
		if g.From != c.next {
			c.problem("a gap from %d, where the output was at %d", g.From, c.next)
		}
		c.next = g.To
		c.gaps++
		c.partial, c.skipping, c.jumped = "", true, true
	case "end":
		c.ended, c.end = true, string(data)
		if id != "" {
			if end, err := strconv.ParseInt(id, 10, 64); err == nil && end != c.next {
				c.problem("the end at offset %d, where the output was at %d, without a gap", end, c.next)
			}
		}
	}
}

// text takes output bytes and checks the whole lines among them.
func (c *outputCheck) text(s string) {
	if c.skipping {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return
		}
		s, c.skipping = s[i+1:], false
	}
	s = c.partial + s
	lines := strings.Split(s, "\n")
	c.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		n, err := strconv.Atoi(l)
		if err != nil {
			c.problem("a line %q that is not the next number", l)
			continue
		}
		switch {
		case c.jumped && n > c.last:
			c.lost += n - c.last - 1
		case n <= c.last:
			c.problem("line %d repeated after line %d", n, c.last)
		case n != c.last+1:
			c.problem("lines %d..%d missing without a gap", c.last+1, n-1)
		}
		c.jumped = false
		c.last = max(c.last, n)
	}
}

// countCheck says whether text is 1, 2, ... one a line (the last maybe unfinished), and with
// whole set exactly 1..n.
func countCheck(text string, n int, whole bool) error {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		want := strconv.Itoa(i + 1)
		if i == len(lines)-1 {
			if !strings.HasPrefix(want, l) {
				return fmt.Errorf("the output ends with %q, not the start of line %d", l, i+1)
			}
			if whole && (l != "" || i != n) {
				return fmt.Errorf("the output has %d lines (and %q after them), want %d", i, l, n)
			}
			return nil
		}
		if l != want {
			return fmt.Errorf("line %d is %q", i+1, l)
		}
	}
	return nil
}

// turnLines compares the agent lines recorded (or delivered) for one turn with the fixture's:
// lost is how many of the fixture's lines are not there, dup how many are there more than
// once, and ordered whether what is there comes in the fixture's order.
func turnLines(fixture, got []string) (lost, dup int, ordered bool) {
	want := map[string]int{}
	for _, l := range fixture {
		want[l]++
	}
	have := map[string]int{}
	for _, l := range got {
		have[l]++
	}
	for l, n := range want {
		lost += max(0, n-have[l])
	}
	for l, n := range have {
		dup += max(0, n-want[l])
	}
	ordered = len(got) == len(fixture)
	for i := range got {
		if !ordered {
			break
		}
		ordered = got[i] == fixture[i]
	}
	return lost, dup, ordered
}

// canonical is a JSON value in one spelling (keys sorted, no spaces), so that a line and its
// recorded event's data compare equal when they say the same.
func canonical(b []byte) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "invalid:" + string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
