package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
)

// TestWatchStream: a directory's changes arrive as SSE messages with id: their seq; a second
// client resuming with Last-Event-ID gets exactly what came after, from the same watch.
func TestWatchStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	s, r := e.getStream(t, ada, "/api/sandboxes/box/watch?path=.", "")
	if s == nil {
		t.Fatalf("watch = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "POST", "/api/sandboxes/box/exec", ada, execBody("mkdir one && rmdir one")); r.status != http.StatusOK {
		t.Fatalf("exec = %d %s", r.status, r.raw)
	}
	evs := s.events(t, 2, "", "seq")
	for i, want := range []string{"create one", "remove one"} {
		if got := evs[i].data["type"].(string) + " " + evs[i].data["name"].(string); got != want {
			t.Errorf("event %d: %s, want %s", i+1, got, want)
		}
		if ts, _ := evs[i].data["ts"].(string); !strings.HasSuffix(ts, "Z") || len(ts) != len("2006-01-02T15:04:05.000Z") {
			t.Errorf("event %d ts %q", i+1, ts)
		}
	}
	again, r := e.getStream(t, ada, "/api/sandboxes/box/watch?path=.", "1")
	if again == nil {
		t.Fatalf("resume = %d %s", r.status, r.raw)
	}
	if ev := again.events(t, 1, "", "seq")[0]; ev.id != "2" {
		t.Errorf("resumed after 1 at %s, want 2", ev.id)
	}
}

// TestWatchRefused: bad input and other people's sandboxes get clear errors; a token holds at
// most its watch limit.
func TestWatchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	for _, c := range []struct {
		tok, query string
		status     int
		says       string
	}{
		{ada, "", http.StatusBadRequest, "path must name a directory"},
		{ada, "?path=/no/such/dir", http.StatusBadRequest, "/no/such/dir does not exist"},
		{ada, "?path=.&recursive=maybe", http.StatusBadRequest, "recursive must be true or false"},
		{ada, "?path=%ff", http.StatusBadRequest, "not UTF-8"},
		{ada, "?path=/tmp/%c3%28", http.StatusBadRequest, "not UTF-8"},
		{ada, "?path=.&since=x", http.StatusBadRequest, "since"},
		{bob, "?path=.", http.StatusNotFound, "no such sandbox"},
	} {
		s, r := e.getStream(t, c.tok, "/api/sandboxes/box/watch"+c.query, "")
		if s != nil || r.status != c.status || !strings.Contains(strings.ToLower(r.raw), strings.ToLower(c.says)) {
			t.Errorf("watch%s = %d %s, want %d saying %q", c.query, r.status, r.raw, c.status, c.says)
		}
	}
	for i := 0; i < 2; i++ {
		if s, r := e.getStream(t, ada, "/api/sandboxes/box/watch?path=.", ""); s == nil {
			t.Fatalf("watch %d = %d %s", i+1, r.status, r.raw)
		}
	}
	s, r := e.getStream(t, ada, "/api/sandboxes/box/watch?path=/tmp", "")
	if s != nil || r.status != http.StatusTooManyRequests || !strings.Contains(r.raw, "HANGAR_WATCH_MAX_PER_TOKEN") || r.header.Get("Retry-After") == "" {
		t.Errorf("a third watch = %d %s, want 429 naming HANGAR_WATCH_MAX_PER_TOKEN with Retry-After", r.status, r.raw)
	}
}

// TestWatchInDocker: a watch of a Docker sandbox's workdir, through the container's daemon,
// sees a file's life, recursively; destroying the sandbox ends the stream saying so.
func TestWatchInDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	image, err := dockertest.EnsureImage(context.Background(), dockertest.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.sandbox(t, e.admin, "dock", `, "provider": "docker", "image": "`+image+`"`)
	s, r := e.getStream(t, e.admin, "/api/sandboxes/dock/watch?path=.&recursive=true", "")
	if s == nil {
		t.Fatalf("watch = %d %s", r.status, r.raw)
	}
	// The file's life is made once sub's own watch is in place: the daemon adds it before it
	// reports sub, so the client waits for that (a write made before it could not be seen).
	if r := e.do(t, "POST", "/api/sandboxes/dock/exec", e.admin, execBody("mkdir sub")); r.status != http.StatusOK {
		t.Fatalf("exec = %d %s", r.status, r.raw)
	}
	var got []string
	for _, ev := range s.events(t, -1, "create", "seq") {
		got = append(got, ev.data["type"].(string)+" "+ev.data["name"].(string))
	}
	if r := e.do(t, "POST", "/api/sandboxes/dock/exec", e.admin, execBody("echo hi > sub/f && rm sub/f")); r.status != http.StatusOK {
		t.Fatalf("exec = %d %s", r.status, r.raw)
	}
	for _, ev := range s.events(t, -1, "remove", "seq") {
		got = append(got, ev.data["type"].(string)+" "+ev.data["name"].(string))
	}
	if want := "create sub,create sub/f,write sub/f,remove sub/f"; strings.Join(got, ",") != want {
		t.Errorf("events %q, want %q", strings.Join(got, ","), want)
	}
	if r := e.do(t, "DELETE", "/api/sandboxes/dock", e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("destroy = %d %s", r.status, r.raw)
	}
	end := s.until(t, "close")
	if reason := end[len(end)-1].data["reason"]; reason != "destroyed" {
		t.Errorf("the stream closed with %v, want destroyed", reason)
	}
}
