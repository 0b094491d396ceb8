package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One clock (STYLE.md 11, 16): where time decides what hangar does — a timeout, a lifetime, a
// poll, a keep-alive, a stamp that is stored — it asks a quartz.Clock passed in (serve passes
// one real clock to every package), so tests move it instead of sleeping. This test keeps it
// so: a production file in internal/ that reads or waits on the wall clock itself must be on
// the allow-list below, with the reason the wall clock is right there.

// wallClock is what reads or waits on the wall clock in package time.
var wallClock = map[string]bool{"Now": true, "Since": true, "Until": true, "After": true, "Tick": true,
	"NewTimer": true, "NewTicker": true, "AfterFunc": true, "Sleep": true}

// wallClockAllowed is each file (or folder, ending in /) under internal/ that may use the wall
// clock, and why.
var wallClockAllowed = map[string]string{
	// Connection deadlines: the kernel compares them with the wall clock, not hangar.
	"rest/sse.go":      "an SSE response's write deadline",
	"rest/bodytime.go": "a request body's read deadline",
	"mcp/sink.go":      "an MCP response's write deadline",
	"shed/shed.go":     "the deadline of the answer to a refused connection (a net.Conn deadline is a wall time)",
	"h2/server.go":     "an HTTP/2 connection's write deadline",
	// A context's deadline is wall-clock time.
	"store/sqlstore/pool.go": "half of what a context's deadline leaves",
	// Before anything runs.
	"store/sqlite/lock.go": "the flock poll of Open's migrations, before the store (and its clock) exists",
	// Not the server: a person's terminal.
	"cli/": "the client verbs: ages shown against the terminal's clock, redraws, reconnect backoff",
	// Helpers of other packages' tests.
	"provider/providertest/": "test helpers: polls of real sandboxes in tests",
	"store/storetest/":       "test helpers: rows stamped now in the stores' shared suite",
}

func TestOneClock(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "internal")
	used := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if allowed := wallClockAllowedFor(rel); allowed != "" {
			used[allowed] = true
			return nil
		}
		for _, call := range wallClockCalls(t, path) {
			t.Errorf("%s: time.%s: take the clock passed in (a quartz.Clock), or allow the file here with the reason", call.pos, call.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for entry := range wallClockAllowed {
		if !used[entry] {
			t.Errorf("the allow-list names %s, which is gone: take it off", entry)
		}
	}
}

// wallClockAllowedFor is the allow-list's entry that covers rel, or "".
func wallClockAllowedFor(rel string) string {
	for entry := range wallClockAllowed {
		if rel == entry || (strings.HasSuffix(entry, "/") && strings.HasPrefix(rel, entry)) {
			return entry
		}
	}
	return ""
}

type wallClockCall struct {
	pos  token.Position
	name string
}

// wallClockCalls lists the uses of package time's wall-clock functions in the file at path,
// under whatever name it imports time.
func wallClockCalls(t *testing.T, path string) []wallClockCall {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name = "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	var calls []wallClockCall
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && wallClock[sel.Sel.Name] {
			calls = append(calls, wallClockCall{fset.Position(sel.Pos()), sel.Sel.Name})
		}
		return true
	})
	return calls
}
