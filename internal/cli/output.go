package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// fdOf is w's file descriptor when w is a file.
func fdOf(v any) (int, bool) {
	f, ok := v.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	return int(f.Fd()), true
}

// isTerminal says whether v (a reader or writer) is a terminal.
func isTerminal(v any) bool {
	fd, ok := fdOf(v)
	return ok && term.IsTerminal(fd)
}

// colour says whether to colour what goes to w: only on a terminal, never with NO_COLOR.
func (a *app) colour(w io.Writer) bool {
	return a.cfg.Getenv("NO_COLOR") == "" && isTerminal(w)
}

// paint wraps s in the ANSI colour code when on is true.
func paint(on bool, code, s string) string {
	if !on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// stateColour is a state's colour: green running or done, red failed, yellow paused or stuck,
// grey what has ended.
func stateColour(state string) string {
	switch state {
	case "running", "done", "exited 0":
		return "32"
	case "failed", "lost":
		return "31"
	case "paused", "stuck", "queued", "creating":
		return "33"
	case "destroyed", "exited", "cancelled", "idle":
		return "90"
	}
	if strings.HasPrefix(state, "exited") {
		return "31"
	}
	return ""
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, in columns two spaces apart. A cell's width is its
// printed width: the colour codes paint adds take none.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.row(header...)
	return t
}

// row adds a row; cell may hold colour codes made by paint.
func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// flush writes the rows, each cell padded to its column's widest, without trailing spaces.
func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], printedWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-printedWidth(c)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// ansiColour matches the colour codes paint writes (ANSI SGR sequences).
var ansiColour = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// printedWidth is how many characters s takes on a terminal: its runes, less colour codes.
func printedWidth(s string) int {
	return utf8.RuneCountInString(ansiColour.ReplaceAllString(s, ""))
}

// oneLine is s on one line, cut to n characters with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ago says how long ago t was, roughly: "5s", "3m", "2h", "4d"; "" for the zero time.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// spinner shows a turning wheel and a message on w while a long wait lasts, only when w is a
// terminal. Its one goroutine redraws it every 100 ms until stop, which clears the line.
type spinner struct {
	stopOnce sync.Once
	done     chan struct{}
	exited   chan struct{}
}

func (a *app) spin(msg string) *spinner {
	s := &spinner{done: make(chan struct{}), exited: make(chan struct{})}
	w := a.cfg.Stderr
	if !isTerminal(w) {
		close(s.exited)
		return s
	}
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	go func() {
		defer close(s.exited)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r%s %s", frames[i%len(frames)], msg)
			select {
			case <-s.done:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *spinner) stop() {
	s.stopOnce.Do(func() { close(s.done) })
	<-s.exited
}

// stdinFile is stdin as an *os.File, when it is one.
func (a *app) stdinFile() (*os.File, bool) {
	f, ok := a.cfg.Stdin.(*os.File)
	return f, ok
}

// printAnswer sends one request and prints hangar's answer: with -o json as it came, else as
// human says it from the answer decoded into a T.
func printAnswer[T any](ctx context.Context, a *app, method, path string, body any, human func(T)) error {
	asJSON, c, err := a.jsonClient()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, method, path, body, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(a.cfg.Stdout, raw)
	}
	var v T
	json.Unmarshal(raw, &v)
	human(v)
	return nil
}

// printList gets the list hangar answers GET path with ({key: [...]}) and prints it: with -o
// json as {key: [...]}, else as a table under header, one row a T made by row.
func printList[T any](ctx context.Context, a *app, path, key string, header []string, row func(T) []string) error {
	asJSON, c, err := a.jsonClient()
	if err != nil {
		return err
	}
	var out map[string]json.RawMessage
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return err
	}
	var list []json.RawMessage
	if raw, ok := out[key]; ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("read hangar's answer to GET %s: %w", path, err)
		}
	}
	if asJSON {
		return printJSON(a.cfg.Stdout, map[string][]json.RawMessage{key: list})
	}
	t := newTable(a.cfg.Stdout, header...)
	for _, raw := range list {
		var v T
		json.Unmarshal(raw, &v)
		t.row(row(v)...)
	}
	return t.flush()
}
