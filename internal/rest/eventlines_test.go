package rest_test

import (
	"net/http"
	"testing"
)

// TestEventLinesOverREST: each event of a job, in a page and on its stream alike, carries what
// it says to a person (lines: kind and text): a shell command as "$ command", a failed tool's
// output, thinking folded without its signature, the result with its cost, hangar's turn
// events; an event that says nothing has no lines.
func TestEventLinesOverREST(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	prompt := `cat <<'EOF'
{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Run the tests.","signature":"EpYCsecretsig"},{"type":"tool_use","name":"Bash","input":{"command":"npm test"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","content":"1 failing","is_error":true}]}}
{"type":"system","subtype":"hook_started","hook_name":"x"}
{"type":"result","subtype":"success","result":"Fixed.","total_cost_usd":1.71}
EOF`
	r := e.do(t, "POST", "/api/jobs", ada, jsonBody(map[string]any{"prompt": prompt, "agent": "command", "sandbox": "box"}))
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/jobs = %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	want := []string{
		`[{"kind":"turn","text":"── ` + r.body["turn"].(map[string]any)["id"].(string) + ` started (command)"}]`,
		`[{"kind":"thinking","text":"(thinking)"},{"kind":"tool_call","text":"$ npm test"}]`,
		`[{"kind":"error","text":"  ✗ 1 failing"}]`,
		`null`, // a hook says nothing to a person
		`[{"kind":"result","text":"result: Fixed. (cost $1.7100)"}]`,
		`[{"kind":"turn","text":"── turn done, exit 0, cost $1.7100"}]`,
	}
	s, sr := e.getStream(t, ada, "/api/jobs/"+id+"/events/stream", "")
	if s == nil {
		t.Fatalf("events/stream = %d %s", sr.status, sr.raw)
	}
	streamed := s.events(t, -1, "turn.finished", "job_seq")
	s.close()
	paged := e.allEvents(t, "/api/jobs/"+id+"/events", ada, 100)
	if len(streamed) != len(want) || len(paged) != len(want) {
		t.Fatalf("%d events streamed, %d in pages, want %d", len(streamed), len(paged), len(want))
	}
	for i, w := range want {
		if got := jsonBody(streamed[i].data["lines"]); got != w {
			t.Errorf("streamed event %d (%s) lines %s, want %s", i+1, streamed[i].data["type"], got, w)
		}
		if got := jsonBody(paged[i]["lines"]); got != w {
			t.Errorf("paged event %d (%s) lines %s, want %s", i+1, paged[i]["type"], got, w)
		}
	}
}
