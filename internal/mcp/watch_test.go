package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readWatch reads a watch resource and decodes its page.
func (s *subscriber) readWatch(t *testing.T, uri string) (page struct {
	Events   []map[string]any `json:"events"`
	Next     int64            `json:"next"`
	Watching bool             `json:"watching"`
}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := s.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &page); err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return page
}

// TestWatchSubscription: a client of each era subscribed to a sandbox's directory is told of a
// change made by a command in the sandbox, and reads exactly the new changes with since; a
// client of another user may neither subscribe nor read.
func TestWatchSubscription(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watches: true})
	adaID, ada := e.userToken(t, "ada", "user", "mcp")
	_, bob := e.userToken(t, "bob", "user", "mcp")
	e.sandbox(t, ada, "box", "")
	for i, era := range eras {
		t.Run(era, func(t *testing.T) {
			dir := "d" + string(rune('0'+i))
			if code, _ := e.do(t, "POST", "/api/sandboxes/box/exec", ada, `{"command": "mkdir `+dir+`"}`); code != 200 {
				t.Fatalf("mkdir = %d", code)
			}
			uri := "hangar://sandboxes/box/watch?path=" + dir
			s := e.subscriber(t, ada, era, nil)
			if page := s.readWatch(t, uri); page.Watching || len(page.Events) != 0 {
				t.Errorf("before any subscription: %+v, want not watching, nothing", page)
			}
			s.subscribe(t, e, adaID, uri)
			if code, _ := e.do(t, "POST", "/api/sandboxes/box/exec", ada, `{"command": "touch `+dir+`/a"}`); code != 200 {
				t.Fatalf("touch = %d", code)
			}
			if u := s.next(t); u.uri != uri {
				t.Fatalf("updated %s, want %s", u.uri, uri)
			}
			page := s.readWatch(t, uri+"&since=0")
			if !page.Watching || len(page.Events) == 0 || page.Events[0]["name"] != "a" || page.Events[0]["type"] != "create" || page.Events[0]["seq"] != 1.0 {
				t.Fatalf("read after the change: %+v", page)
			}
			// touch may still report its attribute change (chmod) after the create was read:
			// since gives only what came after next, never what was read already.
			again := s.readWatch(t, uri+"&since="+jsonNumber(page.Next))
			for _, ev := range again.Events {
				if seq, _ := ev["seq"].(float64); int64(seq) <= page.Next {
					t.Errorf("read since next (%v): %+v, want only events after it", page.Next, again)
				}
			}
			if len(again.Events) == 0 && again.Next != page.Next {
				t.Errorf("read since next: %+v, next moved with nothing new", again)
			}
			other := e.subscriber(t, bob, era, nil)
			if code, msg := other.refusal(t, e, bob, uri); code != int(jsonrpc.CodeInvalidParams) || !strings.Contains(msg, "not found") {
				t.Errorf("bob subscribing: %d %q, want Resource not found", code, msg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			if _, err := other.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("bob reading: %v, want Resource not found", err)
			}
		})
	}
}

// TestWatchResourceBadInput: what cannot be watched says why.
func TestWatchResourceBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watches: true})
	_, ada := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, ada, "box", "")
	e.sandbox(t, ada, "plain", `, "daemon": false`)
	s := e.subscriber(t, ada, eras[0], nil)
	for uri, says := range map[string]string{
		"hangar://sandboxes/box/watch":                     "names no directory",
		"hangar://sandboxes/box/watch?path=.&since=3":      "without since",
		"hangar://sandboxes/box/watch?path=.&recursive=no": "recursive must be true or false",
		"hangar://sandboxes/box/watch?path=/no/such/dir":   "/no/such/dir does not exist",
		"hangar://sandboxes/box/watch?path=.&depth=2":      "not depth",
		"hangar://sandboxes/plain/watch?path=.":            "needs the sandbox's daemon",
	} {
		if code, msg := s.refusal(t, e, ada, uri); code == 0 || !strings.Contains(msg, says) {
			t.Errorf("subscribe %s: %d %q, want it refused saying %q", uri, code, msg, says)
		}
	}
}

// TestWatchAbsolutePath: a watch resource with an absolute path, as its description allows, can
// be read (the SDK's template matching alone did not find it) and subscribed to.
func TestWatchAbsolutePath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watches: true})
	adaID, ada := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, ada, "box", "")
	code, out := e.do(t, "POST", "/api/sandboxes/box/exec", ada, `{"command": "mkdir abs && cd abs && pwd"}`)
	dir, _ := out["stdout"].(string)
	if code != 200 || !strings.HasPrefix(dir, "/") {
		t.Fatalf("mkdir = %d %v", code, out)
	}
	uri := "hangar://sandboxes/box/watch?path=" + strings.TrimSpace(dir)
	for _, era := range eras {
		s := e.subscriber(t, ada, era, nil)
		if page := s.readWatch(t, uri); page.Watching != (era != eras[0]) { // the first era's stays subscribed
			t.Errorf("%s: before its subscription: %+v", era, page)
		}
		s.subscribe(t, e, adaID, uri)
		if page := s.readWatch(t, uri); !page.Watching {
			t.Errorf("%s: once subscribed: %+v, want watching", era, page)
		}
	}
}

// TestWatchResourceStateRefused: a sandbox whose state does not allow a watch is refused with
// hangar's conflict code and a sentence naming the state, not an internal error.
func TestWatchResourceStateRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{watches: true})
	_, ada := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, ada, "napping", "")
	if status, body := e.do(t, "POST", "/api/sandboxes/napping/pause", ada, ""); status >= 300 {
		t.Fatalf("pause: %d %v", status, body)
	}
	for _, era := range eras {
		s := e.subscriber(t, ada, era, nil)
		if code, msg := s.refusal(t, e, ada, "hangar://sandboxes/napping/watch?path=."); code != -32009 || !strings.Contains(msg, "paused") {
			t.Errorf("%s: subscribe to a paused sandbox's watch: %d %q, want -32009 naming its state", era, code, msg)
		}
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
