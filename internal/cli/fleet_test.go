package cli_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/creack/pty"
)

// TestFleet: --once -o json is the fleet; live, the stream (opened with a ticket) gives a
// snapshot then each change, printed as JSON lines, and on a terminal the table is redrawn,
// within the terminal's 80×24, on each change and each second (its times tick).
func TestFleet(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "fleet-box")
	env := s.env(t)
	var f map[string]any
	if err := json.Unmarshal([]byte(hangar(t, env, "", "fleet", "--once", "-o", "json").want(t, 0).stdout), &f); err != nil || f["user"] != "admin" {
		t.Fatalf("fleet --once -o json = %v (%v)", f, err)
	}
	b := startHangar(t, env, "fleet", "-o", "json")
	var ev struct {
		Event string         `json:"event"`
		Data  map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(b.line(t)), &ev); err != nil || ev.Event != "snapshot" {
		t.Fatalf("first fleet event = %v (%v), want the snapshot", ev, err)
	}
	screen, _ := startPTY(t, env, &pty.Winsize{Rows: 24, Cols: 80}, "fleet")
	eventually(t, "the table on the terminal", func() bool { return strings.Contains(screen.text(), "admin's fleet") })
	eventually(t, "a redraw with nothing changed: the times tick", func() bool { return strings.Count(screen.text(), "\x1b[H\x1b[2J") >= 2 })
	s.api(t, "POST", "/api/sessions", `{"name": "fleet-chat", "sandbox": "fleet-box", "agent": "command"}`)
	defer s.api(t, "DELETE", "/api/sessions/fleet-chat", "")
	for ev.Event != "agent" || ev.Data["name"] != "fleet-chat" {
		if err := json.Unmarshal([]byte(b.line(t)), &ev); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the new session redrawn on the terminal", func() bool {
		text := screen.text()
		return strings.Contains(text, "fleet-chat")
	})
	frames := strings.Split(screen.text(), "\x1b[H\x1b[2J")
	frame := strings.Split(strings.TrimSuffix(frames[len(frames)-2], "\r\n"), "\r\n") // the last whole one
	if len(frame) > 23 {
		t.Errorf("a frame of %d lines on a terminal of 24:\n%s", len(frame), strings.Join(frame, "\n"))
	}
	for _, l := range frame {
		if n := utf8.RuneCountInString(regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(l, "")); n > 80 {
			t.Errorf("a line of %d cells on a terminal of 80: %q", n, l)
		}
	}
	b.cmd.Process.Signal(syscall.SIGINT)
	b.rest(t)
	screen.cmd.Process.Signal(syscall.SIGINT)
	if code := screen.wait(t); code != 0 {
		t.Errorf("fleet after Ctrl-C exited %d", code)
	}
}

// TestFleetWeb: hangar fleet --web starts $BROWSER on the page with a one-time sign-in ticket
// in the address's fragment, which signs a page in once; with no browser to start it prints
// the address to open.
func TestFleetWeb(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	dir := t.TempDir()
	opened := filepath.Join(dir, "opened")
	browser := filepath.Join(dir, "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s' \"$1\" > "+opened+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := hangar(t, s.env(t, "BROWSER="+browser), "", "fleet", "--web").want(t, 0)
	if !strings.Contains(r.stdout, "Opened "+s.url+"/fleet/ in your browser") || strings.Contains(r.stdout, "hfs_") {
		t.Errorf("fleet --web said %q; want the page's address, without its ticket", r.stdout)
	}
	link, err := os.ReadFile(opened)
	if err != nil {
		t.Fatal(err)
	}
	page, ticket, _ := strings.Cut(string(link), "#ticket=")
	if page != s.url+"/fleet/" || !strings.HasPrefix(ticket, "hfs_") {
		t.Fatalf("the browser was given %q; want %s/fleet/#ticket=hfs_…", link, s.url)
	}
	signIn := func(ticket string) int {
		resp, err := http.Post(s.url+"/api/fleet/sign-in", "application/json", strings.NewReader(`{"ticket": "`+ticket+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := signIn(ticket); code != http.StatusCreated {
		t.Errorf("signing in with the browser's ticket = %d, want 201", code)
	}
	if code := signIn(ticket); code != http.StatusUnauthorized {
		t.Errorf("its ticket again = %d, want 401", code)
	}

	r = hangar(t, s.env(t, "PATH="+dir+"/none"), "", "fleet", "--web").want(t, 0)
	printed := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s.url) + `/fleet/#ticket=(hfs_\S+)$`).FindStringSubmatch(r.stdout)
	if printed == nil || !strings.Contains(r.stderr, "no browser") {
		t.Fatalf("fleet --web without a browser: stdout %q, stderr %q; want the link printed and why", r.stdout, r.stderr)
	}
	if code := signIn(printed[1]); code != http.StatusCreated {
		t.Errorf("signing in with the printed ticket = %d, want 201", code)
	}
	hangar(t, s.env(t), "", "fleet", "--web", "--once").want(t, 2)
}
