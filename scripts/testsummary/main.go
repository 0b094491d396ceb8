// Command testsummary reads `go test -json` on standard input and writes what `go test` without
// -v writes (each package's ok or FAIL line, the output of failed tests, build errors), plus
// every skipped test with its reason, so that a skip is seen without -v. It ends with the line
// "N passed, N failed, N skipped" (tests, subtests included) and exits 1 when a test or a
// package failed. `make test` pipes into it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type counts struct{ passed, failed, skipped int }

func main() {
	c, failed, err := summarise(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", c.passed, c.failed, c.skipped)
	if failed {
		os.Exit(1)
	}
}

// summarise writes the report to w and returns the counts and whether anything failed.
func summarise(r io.Reader, w io.Writer) (counts, bool, error) {
	var c counts
	failed := false
	output := map[string][]string{} // package + test -> its output lines so far
	var skips []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(w, string(line)) // not an event: go's own message, say it as it came
			continue
		}
		key := ev.Package + " " + ev.Test
		switch {
		case ev.Action == "build-output":
			fmt.Fprint(w, ev.Output)
		case ev.Action == "build-fail":
			failed = true
		case ev.Test == "" && ev.Action == "output":
			// The package's own lines: "ok  pkg 1.2s", "FAIL pkg", a panic outside a test.
			if s := strings.TrimSpace(ev.Output); s != "PASS" && s != "FAIL" && !strings.HasPrefix(s, "=== ") {
				fmt.Fprint(w, ev.Output)
			}
		case ev.Test == "" && ev.Action == "fail":
			failed = true
		case ev.Test == "":
			// The package's start, pass or skip: its output lines said so.
		case ev.Action == "output":
			output[key] = append(output[key], ev.Output)
		case ev.Action == "pass":
			c.passed++
			delete(output, key)
		case ev.Action == "fail":
			c.failed++
			failed = true
			for _, l := range output[key] {
				fmt.Fprint(w, l)
			}
			delete(output, key)
		case ev.Action == "skip":
			c.skipped++
			skips = append(skips, fmt.Sprintf("SKIP %s %s: %s", ev.Package, ev.Test, skipReason(output[key])))
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		return c, failed, err
	}
	if len(skips) > 0 {
		fmt.Fprintf(w, "\n%d skipped (run with the services .ci/run starts to run them):\n", len(skips))
		for _, s := range skips {
			fmt.Fprintln(w, s)
		}
	}
	return c, failed, nil
}

// skipReason is what a skipped test said, without go test's own "=== RUN" and "--- SKIP" lines.
func skipReason(lines []string) string {
	var said []string
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- SKIP") {
			continue
		}
		said = append(said, s)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " ")
}
