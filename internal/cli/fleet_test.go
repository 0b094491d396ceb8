package cli_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// TestFleet: --once -o json is the fleet; live, the stream (opened with a ticket) gives a
// snapshot then each change, printed as JSON lines, and on a terminal the table is redrawn.
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
	screen, _ := startPTY(t, env, &pty.Winsize{Rows: 40, Cols: 200}, "fleet")
	eventually(t, "the table on the terminal", func() bool { return strings.Contains(screen.text(), "admin's fleet") })
	s.api(t, "POST", "/api/sessions", `{"name": "fleet-chat", "sandbox": "fleet-box", "agent": "command"}`)
	defer s.api(t, "DELETE", "/api/sessions/fleet-chat", "")
	for ev.Event != "agent" || ev.Data["name"] != "fleet-chat" {
		if err := json.Unmarshal([]byte(b.line(t)), &ev); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the new session redrawn on the terminal", func() bool {
		text := screen.text()
		return strings.Contains(text, "fleet-chat") && strings.Count(text, "\x1b[H\x1b[2J") >= 2
	})
	b.cmd.Process.Signal(syscall.SIGINT)
	b.rest(t)
	screen.cmd.Process.Signal(syscall.SIGINT)
	if code := screen.wait(t); code != 0 {
		t.Errorf("fleet after Ctrl-C exited %d", code)
	}
}
