package mcp_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// tool calls a tool in the background, with a progress token when progress is set.
func (c *client) tool(name string, args map[string]any, progress bool) *call {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress {
		nextToken.Lock()
		nextToken.n++
		params.SetProgressToken("p" + strconv.Itoa(nextToken.n))
		nextToken.Unlock()
	}
	k := &call{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(k.done)
		k.res, k.err = c.session.CallTool(ctx, params)
	}()
	return k
}

// ok calls a tool and returns its structured result; a tool error fails the test.
func (c *client) ok(t *testing.T, name string, args map[string]any) map[string]any {
	t.Helper()
	return structured(t, c.tool(name, args, false).wait(t))
}

// fails calls a tool and returns its tool error's text; a result that is not one fails the test.
func (c *client) fails(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	return errorText(t, c.tool(name, args, false).wait(t))
}

// startProcess starts a background process and returns its id.
func (c *client) startProcess(t *testing.T, sandbox, command string) string {
	t.Helper()
	out := c.ok(t, "process", map[string]any{"action": "start", "sandbox": sandbox, "command": command})
	id, _ := out["process_id"].(string)
	// The answer says how the process is as it is sent: a command that ends at once (echo;
	// exit 3) may have exited already.
	if id == "" || (out["state"] != "running" && out["state"] != "exited") {
		t.Fatalf("start = %v", out)
	}
	return id
}

// waitExited polls list until the process has exited and returns it as listed.
func (c *client) waitExited(t *testing.T, sandbox, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for time.Now().Before(deadline) {
		out := c.ok(t, "process", map[string]any{"action": "list", "sandbox": sandbox})
		ps, _ := out["processes"].([]any)
		for _, p := range ps {
			p := p.(map[string]any)
			if p["process_id"] == id && p["state"] == "exited" {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %s did not exit", id)
	return nil
}

// drainProgress collects progress messages until their text adds up to want's length.
func (c *client) drainProgress(t *testing.T, n int) []progress {
	t.Helper()
	var got []progress
	size := 0
	deadline := time.After(pollTimeout)
	for size < n {
		select {
		case p := <-c.progress:
			got = append(got, p)
			size += len(p.message)
		case <-deadline:
			t.Fatalf("progress adds up to %d bytes, want %d: %+v", size, n, got)
		}
	}
	return got
}

// progressUntil collects progress notifications until one reaches value.
func (c *client) progressUntil(t *testing.T, value float64) []progress {
	t.Helper()
	var got []progress
	deadline := time.After(pollTimeout)
	for len(got) == 0 || got[len(got)-1].value < value {
		select {
		case p := <-c.progress:
			got = append(got, p)
		case <-deadline:
			t.Fatalf("no progress reached %v: %+v", value, got)
		}
	}
	return got
}

func TestProcessAttachResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, ada, era)
			gate, open := providertest.Gate(t)
			id := c.startProcess(t, "box", `for i in $(seq 1 40); do echo "line $i"; if [ $i = 20 ]; then read _ < `+gate+`; fi; done`)

			// The first attach waits a little, seeing part of the output (up to the gate) as
			// progress.
			first := structured(t, c.tool("process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "wait_seconds": 0.5}, true).wait(t))
			tail1, _ := first["tail"].(string)
			next1 := int64(first["next"].(float64))
			if first["gap"] != nil || first["streamed"] != true || int64(len(tail1)) != next1 || first["tail_from"] != 0.0 {
				t.Fatalf("first attach = %v", first)
			}
			var progressed strings.Builder
			last := 0.0
			for _, p := range c.drainProgress(t, len(tail1)) {
				if p.value <= last {
					t.Errorf("progress went from %v to %v", last, p.value)
				}
				last = p.value
				progressed.WriteString(p.message)
			}
			if progressed.String() != tail1 || (next1 > 0 && last != float64(next1)) {
				t.Errorf("progress said %q up to %v; the result %q up to %d", progressed.String(), last, tail1, next1)
			}

			// The second carries on from next, without a progress token, and ends with the process.
			open()
			second := structured(t, c.tool("process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since": next1, "wait_seconds": 600}, false).wait(t))
			tail2, _ := second["tail"].(string)
			if second["state"] != "exited" || second["exit_code"] != 0.0 || second["gap"] != nil || second["tail_from"] != float64(next1) {
				t.Errorf("second attach = %v", second)
			}
			if got := tail1 + tail2; got != want.String() {
				t.Errorf("the two attaches saw %q, want %q", got, want.String())
			}
			if second["next"] != float64(want.Len()) {
				t.Errorf("next = %v, want %d", second["next"], want.Len())
			}
			if len(c.progress) != 0 {
				t.Errorf("%d progress notifications without a progress token", len(c.progress))
			}

			// Past the end: nothing, and next is the end.
			past := c.ok(t, "process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since": 1 << 20})
			if past["tail"] != "" || past["next"] != float64(want.Len()) || !strings.Contains(strings.Join(notes(past), " "), "past the end") {
				t.Errorf("attach past the end = %v", past)
			}
		})
	}
}

func notes(out map[string]any) []string {
	var ns []string
	list, _ := out["notes"].([]any)
	for _, n := range list {
		ns = append(ns, n.(string))
	}
	return ns
}

func TestProcessAttachExited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			id := c.startProcess(t, "box", "echo done; exit 3")
			c.waitExited(t, "box", id)
			// wait_seconds past 600 is clamped, and an exited process's attach returns at once
			// (the call's own timeout is far below 600 s).
			out := c.ok(t, "process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "wait_seconds": 900})
			if out["state"] != "exited" || out["exit_code"] != 3.0 || out["tail"] != "done\n" || out["next"] != 5.0 {
				t.Errorf("attach = %v", out)
			}
			// since_seconds: what it printed in the last hour, which is all of it.
			if out := c.ok(t, "process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since_seconds": 3600}); out["tail"] != "done\n" || out["next"] != 5.0 {
				t.Errorf("attach with since_seconds 3600 = %v, want all its output", out)
			}
			if ns := strings.Join(notes(out), " "); !strings.Contains(ns, "at most 600") {
				t.Errorf("notes %q do not say wait_seconds was clamped", ns)
			}
			if got := c.fails(t, "process", map[string]any{"action": "input", "sandbox": "box", "process_id": id, "input": "x"}); !strings.Contains(got, "exited") {
				t.Errorf("input to an exited process: %q", got)
			}
		})
	}
}

func TestProcessOwnership(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			_, bound := e.newToken(t, `{"user": "ada", "scopes": ["mcp"], "sandbox": "box"}`)
			c := e.connect(t, ada, era)
			id := c.startProcess(t, "box", "sleep 300")
			other := e.connect(t, bound, era)
			// A token bound to the sandbox may leave it out; it sees only its own processes.
			list := other.ok(t, "process", map[string]any{"action": "list"})
			if ps := list["processes"].([]any); len(ps) != 0 {
				t.Errorf("another token lists %v", ps)
			}
			for _, args := range []map[string]any{
				{"action": "attach", "process_id": id},
				{"action": "input", "process_id": id, "input": "x"},
				{"action": "kill", "process_id": id},
			} {
				if got := other.fails(t, "process", args); !strings.Contains(got, "no such process") {
					t.Errorf("%v by another token: %q", args, got)
				}
			}
			mine := other.startProcess(t, "", "true")
			if ps := other.ok(t, "process", map[string]any{"action": "list"})["processes"].([]any); len(ps) != 1 || ps[0].(map[string]any)["process_id"] != mine {
				t.Errorf("the bound token lists %v, want only %s", ps, mine)
			}
			if out := c.ok(t, "process", map[string]any{"action": "kill", "sandbox": "box", "process_id": id}); out["process_id"] != id {
				t.Errorf("kill = %v", out)
			}
			c.waitExited(t, "box", id)
		})
	}
}

func TestProcessBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[1])
	id := c.startProcess(t, "box", "cat")
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown action", map[string]any{"action": "frobnicate", "sandbox": "box"}, "no action"},
		{"no action", map[string]any{"sandbox": "box"}, "action"},
		{"no sandbox", map[string]any{"action": "list"}, "which sandbox"},
		{"unknown process", map[string]any{"action": "attach", "sandbox": "box", "process_id": "p_nope"}, "no such process"},
		{"no process", map[string]any{"action": "kill", "sandbox": "box"}, "process_id"},
		{"negative since", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since": -1}, "since"},
		{"negative since_seconds", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since_seconds": -1}, "since_seconds must be"},
		{"since and since_seconds", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since": 3, "since_seconds": 10}, "not both"},
		{"negative wait", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "wait_seconds": -1}, "wait_seconds"},
		{"bad base64", map[string]any{"action": "input", "sandbox": "box", "process_id": id, "input": "!!", "base64": true}, "base64"},
		{"nothing to send", map[string]any{"action": "input", "sandbox": "box", "process_id": id}, "nothing to send"},
		{"empty command", map[string]any{"action": "start", "sandbox": "box"}, "command is empty"},
		{"unknown sandbox", map[string]any{"action": "start", "sandbox": "nope", "command": "true"}, "no such sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.fails(t, "process", tc.args); !strings.Contains(got, tc.want) {
				t.Errorf("error %q does not mention %q", got, tc.want)
			}
		})
	}
	c.ok(t, "process", map[string]any{"action": "kill", "sandbox": "box", "process_id": id})
	c.waitExited(t, "box", id)
}

func TestProcessInputAndKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			id := c.startProcess(t, "box", "cat")
			c.ok(t, "process", map[string]any{"action": "input", "sandbox": "box", "process_id": id, "input": "hello\n"})
			c.ok(t, "process", map[string]any{"action": "input", "sandbox": "box", "process_id": id, "input": "d29ybGQK", "base64": true, "eof": true})
			out := c.ok(t, "process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "wait_seconds": 600})
			if out["tail"] != "hello\nworld\n" || out["state"] != "exited" || out["exit_code"] != 0.0 {
				t.Errorf("cat after input and eof = %v", out)
			}

			sleeper := c.startProcess(t, "box", "sleep 300")
			if out := c.ok(t, "process", map[string]any{"action": "kill", "sandbox": "box", "process_id": sleeper}); out["process_id"] != sleeper {
				t.Errorf("kill = %v", out)
			}
			if p := c.waitExited(t, "box", sleeper); p["exit_code"] == 0.0 {
				t.Errorf("killed sleep = %v", p)
			}
		})
	}
}

func TestProcessAttachLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxPerToken: 1})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[1])
	id := c.startProcess(t, "box", "echo started; sleep 300")
	k := c.tool("process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "wait_seconds": 600}, true)
	if p := c.nextProgress(t, k); p.message != "started\n" {
		t.Fatalf("progress = %+v", p)
	}
	if got := c.fails(t, "process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id}); !strings.Contains(got, "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("a second attach past the limit: %q", got)
	}
	k.cancel()
	<-k.done
	c.ok(t, "process", map[string]any{"action": "kill", "sandbox": "box", "process_id": id})
	c.waitExited(t, "box", id)
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	_, bob := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, ada, era)
			open := c.ok(t, "terminal_open", map[string]any{"sandbox": "box", "cols": 100, "rows": 30})
			id, _ := open["terminal_id"].(string)
			if id == "" {
				t.Fatalf("terminal_open = %v", open)
			}
			c.ok(t, "terminal_resize", map[string]any{"terminal_id": id, "cols": 80, "rows": 24})
			// readUntil reads the terminal until it shows want (a command's output: the quotes
			// keep the typed line from matching).
			readUntil := func(want string) string {
				t.Helper()
				var seen strings.Builder
				deadline := time.Now().Add(pollTimeout)
				for !strings.Contains(seen.String(), want) {
					if time.Now().After(deadline) {
						t.Fatalf("the terminal showed %q, no %q", seen.String(), want)
					}
					out := c.ok(t, "terminal_read", map[string]any{"terminal_id": id})
					if out["state"] != "running" || out["lost"] != nil {
						t.Fatalf("terminal_read = %v", out)
					}
					seen.WriteString(out["output"].(string))
					time.Sleep(20 * time.Millisecond)
				}
				return seen.String()
			}
			c.ok(t, "terminal_write", map[string]any{"terminal_id": id, "input": "echo h''i\n"})
			readUntil("hi\r\n")
			// Each read returns only what is new since the last: hi is not shown again.
			c.ok(t, "terminal_write", map[string]any{"terminal_id": id, "input": "echo ag''ain\n"})
			if again := readUntil("again\r\n"); strings.Contains(again, "hi\r\n") {
				t.Errorf("a later read repeats earlier output: %q", again)
			}
			if got := e.connect(t, bob, era).fails(t, "terminal_read", map[string]any{"terminal_id": id, "sandbox": "box"}); !strings.Contains(got, "no terminal") {
				t.Errorf("another token's terminal_read: %q", got)
			}
			c.ok(t, "terminal_close", map[string]any{"terminal_id": id})
			p := c.waitExited(t, "box", id)
			if p["pty"] != true {
				t.Errorf("terminal as listed = %v", p)
			}
			if got := c.fails(t, "terminal_read", map[string]any{"terminal_id": id}); !strings.Contains(got, "no terminal") {
				t.Errorf("terminal_read after close: %q", got)
			}
		})
	}
}

func TestProcessGap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	var want strings.Builder
	for i := 1; i <= 2000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			id := c.startProcess(t, "box", "seq 1 2000")
			c.waitExited(t, "box", id)
			k := c.tool("process", map[string]any{"action": "attach", "sandbox": "box", "process_id": id, "since": 10}, true)
			out := structured(t, k.wait(t))
			end := want.Len()
			gap, _ := out["gap"].(map[string]any)
			if gap == nil || gap["from"] != 10.0 || gap["to"] != float64(end-ringBytes) {
				t.Fatalf("attach from 10 = %v, want a gap from 10 to %d", out, end-ringBytes)
			}
			if out["tail"] != want.String()[end-ringBytes:] || out["tail_from"] != float64(end-ringBytes) || out["next"] != float64(end) {
				t.Errorf("attach after the gap = %v", out)
			}
			if ns := strings.Join(notes(out), " "); !strings.Contains(ns, "no longer kept") {
				t.Errorf("notes %q do not mention the gap", ns)
			}
			// The call is over, but its notifications may still be on their way to the handler.
			ps := c.progressUntil(t, float64(end))
			if p := ps[0]; !strings.Contains(p.message, "no longer kept") || p.value != float64(end-ringBytes) {
				t.Errorf("first progress = %+v, want the gap note", p)
			}
		})
	}
}

// TestProcessPerUserLimit: a background process past HANGAR_BACKGROUND_MAX_PER_USER, through
// another token of the same user, is a tool error naming the limit and the user.
func TestProcessPerUserLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxProcsPerUser: 2})
	_, m1 := e.newToken(t, `{"user": "mallory", "scopes": ["user", "mcp"]}`)
	_, m2 := e.newToken(t, `{"user": "mallory", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, m1, "m-box", "")
	c1, c2 := e.connect(t, m1, eras[1]), e.connect(t, m2, eras[1])
	c1.startProcess(t, "m-box", "sleep 300")
	c2.startProcess(t, "m-box", "sleep 300")
	got := c2.fails(t, "process", map[string]any{"action": "start", "sandbox": "m-box", "command": "sleep 300"})
	if !strings.Contains(got, "HANGAR_BACKGROUND_MAX_PER_USER") || !strings.Contains(got, "mallory") {
		t.Errorf("the refusal does not name the limit and the user: %q", got)
	}
}
