package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSessionsCancel: sessions cancel SESSION cancels the turn it runs and waits until it ended
// cancelled; with none running it says so; a named turn that ended is left as it is; unknown
// sessions and turns are errors.
func TestSessionsCancel(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "cancel-box")
	env := s.env(t)
	hangar(t, env, "", "sessions", "create", "cancel-chat", "--sandbox", "cancel-box", "--agent", "command").want(t, 0)
	t.Cleanup(func() { hangar(t, env, "", "sessions", "rm", "cancel-chat") })
	turn := strings.TrimSpace(hangar(t, env, "", "sessions", "turn", "cancel-chat", "sleep 300").want(t, 0).stdout)
	eventually(t, "the turn runs", func() bool {
		return s.api(t, "GET", "/api/sessions/cancel-chat/turns/"+turn, "")["state"] == "running"
	})
	if r := hangar(t, env, "", "__complete", "sessions", "cancel", "cancel-chat", "").want(t, 0); !strings.Contains(r.stdout, turn+"\tsleep 300") {
		t.Errorf("completion of the turn = %q, want %s", r.stdout, turn)
	}

	r := hangar(t, env, "", "sessions", "cancel", "cancel-chat").want(t, 0)
	if want := "Cancelled turn " + turn + " of session cancel-chat.\n"; r.stdout != want {
		t.Errorf("sessions cancel = %q, want %q", r.stdout, want)
	}
	if got := s.api(t, "GET", "/api/sessions/cancel-chat/turns/"+turn, "")["state"]; got != "cancelled" {
		t.Errorf("after sessions cancel, the turn is %v, want cancelled", got)
	}
	r = hangar(t, env, "", "sessions", "cancel", "cancel-chat").want(t, 1)
	if !strings.Contains(r.stderr, "session cancel-chat is running no turn: there is nothing to cancel") {
		t.Errorf("sessions cancel with no turn running: %q", r.stderr)
	}
	var tu map[string]any
	r = hangar(t, env, "", "sessions", "cancel", "cancel-chat", turn, "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &tu); err != nil || tu["id"] != turn || tu["state"] != "cancelled" {
		t.Errorf("sessions cancel -o json of the ended turn = %s (%v)", r.stdout, err)
	}
	for _, args := range [][]string{{"nope"}, {"cancel-chat", "turn_nope"}} {
		r := hangar(t, env, "", append([]string{"sessions", "cancel"}, args...)...).want(t, 1)
		if !strings.Contains(r.stderr, "There is no such session, turn or job") {
			t.Errorf("sessions cancel %v: %q, want it to say there is no such thing", args, r.stderr)
		}
	}
}

// TestJobsCancel: jobs cancel JOB cancels its running turn and waits until it ended cancelled,
// printing the job with -o json; an unknown job is an error.
func TestJobsCancel(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	s.sandbox(t, "jcancel-box")
	env := s.env(t)
	id := strings.TrimSpace(hangar(t, env, "", "jobs", "run", "--agent", "command", "--sandbox", "jcancel-box", "sleep 300").want(t, 0).stdout)
	eventually(t, "the job runs", func() bool { return s.api(t, "GET", "/api/jobs/"+id, "")["state"] == "running" })
	if r := hangar(t, env, "", "__complete", "jobs", "cancel", "").want(t, 0); !strings.Contains(r.stdout, id+"\tsleep 300") {
		t.Errorf("completion of the job = %q, want %s", r.stdout, id)
	}

	var j map[string]any
	r := hangar(t, env, "", "jobs", "cancel", id, "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j["id"] != id || j["state"] != "cancelled" {
		t.Errorf("jobs cancel -o json = %s (%v), want the job, cancelled", r.stdout, err)
	}
	if r := hangar(t, env, "", "jobs", "cancel", id).want(t, 0); r.stdout != "Cancelled job "+id+".\n" {
		t.Errorf("jobs cancel again = %q", r.stdout)
	}
	if r := hangar(t, env, "", "jobs", "cancel", "job_nope").want(t, 1); !strings.Contains(r.stderr, "There is no such session, turn or job") {
		t.Errorf("jobs cancel job_nope: %q", r.stderr)
	}
}
