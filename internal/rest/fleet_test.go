package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/wire"
)

// TestRootLeadsToTheFleet: hangar's address opened in a browser shows the Fleet page.
func TestRootLeadsToTheFleet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/fleet/" {
		t.Fatalf("GET / = %d, Location %q; want 302 to /fleet/", resp.StatusCode, resp.Header.Get("Location"))
	}
	page, err := http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / followed = %d %s, want the Fleet page", page.StatusCode, page.Header.Get("Content-Type"))
	}
}

// TestFleetSignIn: hangar fleet --web's way in. A sign-in ticket, asked for with a person's
// token, signs a page in once (within a minute: fleet's TestSignInTickets), as that person only: the page gets a token of
// its own with the user scope, no later expiry than its maker's, which stops working when its
// maker is revoked. A stream ticket never signs a page in, a sign-in ticket never opens a
// stream, and the tokens that cannot see a fleet get no sign-in ticket.
func TestFleetSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adaID, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"], "expires_in": "2h"}`)
	_, jobs := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	e.sandbox(t, ada, "box", "")
	_, bound := e.newToken(t, ada, `{"scopes": ["user"], "sandbox": "box"}`)
	for name, tok := range map[string]string{"a jobs token": jobs, "a bound token": bound} {
		if r := e.do(t, "POST", "/api/fleet/sign-in-tickets", tok, ""); r.status != http.StatusForbidden {
			t.Errorf("%s asking for a sign-in ticket = %d %s, want 403", name, r.status, r.raw)
		}
	}
	ticket := func(path, tok string) string {
		t.Helper()
		r := e.do(t, "POST", path, tok, "")
		if r.status != http.StatusCreated {
			t.Fatalf("POST %s = %d %s", path, r.status, r.raw)
		}
		return r.body["ticket"].(string)
	}
	signIn := func(tk string) response {
		t.Helper()
		return e.do(t, "POST", "/api/fleet/sign-in", "", `{"ticket": "`+tk+`"}`)
	}

	tk := ticket("/api/fleet/sign-in-tickets", ada)
	if !strings.HasPrefix(tk, "hfs_") {
		t.Errorf("a sign-in ticket %q does not start with hfs_", tk)
	}
	if s, r := e.getStream(t, "", "/api/fleet/stream?ticket="+tk, ""); s != nil || r.status != http.StatusUnauthorized {
		t.Errorf("a sign-in ticket opening the stream = %d %s, want 401", r.status, r.raw)
	}
	if r := signIn(ticket("/api/fleet/tickets", ada)); r.status != http.StatusUnauthorized {
		t.Errorf("a stream ticket signing in = %d %s, want 401", r.status, r.raw)
	}
	for _, body := range []string{"", `{"ticket": "hfs_forged"}`, `{"ticket": 7}`} {
		if r := e.do(t, "POST", "/api/fleet/sign-in", "", body); r.status/100 != 4 || r.body["error"] == nil {
			t.Errorf("signing in with %q = %d %s, want a 4xx JSON error", body, r.status, r.raw)
		}
	}

	r := signIn(tk)
	if r.status != http.StatusCreated {
		t.Fatalf("signing in = %d %s", r.status, r.raw)
	}
	page, _ := r.body["token"].(string)
	adaExpiry := e.clock().Add(2 * time.Hour)
	if exp, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(r.body["expires_at"])); r.body["user"] != "ada" || fmt.Sprint(r.body["scopes"]) != "[user]" || exp.After(adaExpiry) {
		t.Errorf("the page's token = %s; want ada's, the user scope only, expiring no later than %s", r.raw, adaExpiry)
	}
	if again := signIn(tk); again.status != http.StatusUnauthorized || !strings.Contains(again.raw, "hangar fleet --web") {
		t.Errorf("the sign-in ticket again = %d %s, want 401 saying to run hangar fleet --web again", again.status, again.raw)
	}
	if f := e.do(t, "GET", "/api/fleet", page, ""); f.status != http.StatusOK || f.body["user"] != "ada" {
		t.Errorf("GET /api/fleet with the page's token = %d %s, want ada's fleet", f.status, f.raw)
	}
	// The page's token makes no token and signs no other page in (either would outlive the
	// revocation of ada's token, which revokes her pages), and says why.
	for _, c := range []struct{ path, body string }{{"/api/tokens", `{"scopes": ["user"]}`}, {"/api/fleet/sign-in-tickets", ""}} {
		if r := e.do(t, "POST", c.path, page, c.body); r.status != http.StatusForbidden || !strings.Contains(r.raw, "Fleet page's token") {
			t.Errorf("POST %s with the page's token = %d %s, want 403 saying a page's token cannot", c.path, r.status, r.raw)
		}
	}

	// The admin's page is the admin's own fleet, never the admin's powers.
	r = signIn(ticket("/api/fleet/sign-in-tickets", e.admin))
	adminPage, _ := r.body["token"].(string)
	if f := e.do(t, "GET", "/api/fleet?user=ada", adminPage, ""); r.status != http.StatusCreated || f.status != http.StatusForbidden {
		t.Errorf("the admin's page asking for ada's fleet = %d %s (sign-in %d %s), want 403", f.status, f.raw, r.status, r.raw)
	}

	// Revoked in the store (past the API's revoking what it made): its page stops too.
	if err := e.store.RevokeToken(context.Background(), adaID, e.clock()); err != nil {
		t.Fatal(err)
	}
	if f := e.do(t, "GET", "/api/fleet", page, ""); f.status != http.StatusUnauthorized {
		t.Errorf("the page's token once its maker is revoked = %d %s, want 401", f.status, f.raw)
	}
}

// TestFleetOverHTTP: a person's fleet read once and followed live by a browser's way in (a
// one-time ticket, no Authorization header): a session appears, its turn runs and ends; a
// ticket works once; another person's ticket never shows it; revoking the token ends the stream.
func TestFleetOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	adaID, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)
	_, jobs := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	r := e.do(t, "GET", "/api/fleet", ada, "")
	if agents, _ := r.body["agents"].([]any); r.status != http.StatusOK || len(agents) != 1 || agents[0].(map[string]any)["name"] != "s1" {
		t.Fatalf("GET /api/fleet = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/api/fleet?user=ada", bob, ""); r.status != http.StatusForbidden {
		t.Errorf("bob asking for ada's fleet = %d %s, want 403", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/api/fleet?user=a%00b", e.admin, ""); r.status != http.StatusBadRequest {
		t.Errorf("an admin asking for the fleet of a user there cannot be = %d %s, want 400", r.status, r.raw)
	}
	if r := e.do(t, "POST", "/api/fleet/tickets", jobs, ""); r.status != http.StatusForbidden {
		t.Errorf("a jobs token asking for a ticket = %d %s, want 403", r.status, r.raw)
	}
	ticket := func(tok string) string {
		r := e.do(t, "POST", "/api/fleet/tickets", tok, "")
		if r.status != http.StatusCreated {
			t.Fatalf("POST /api/fleet/tickets = %d %s", r.status, r.raw)
		}
		return r.body["ticket"].(string)
	}
	tk := ticket(ada)
	s, r := e.getStream(t, "", "/api/fleet/stream?ticket="+tk, "")
	if s == nil {
		t.Fatalf("stream with a ticket = %d %s", r.status, r.raw)
	}
	if snap, err := s.next(); err != nil || snap.name != "snapshot" || !strings.Contains(snapJSON(snap), `"name":"s1"`) {
		t.Fatalf("first event %v %v, want a snapshot with s1", snap, err)
	}
	if s2, r := e.getStream(t, "", "/api/fleet/stream?ticket="+tk, ""); s2 != nil || r.status != http.StatusUnauthorized || !strings.Contains(r.raw, "ticket") {
		t.Errorf("the ticket again = %d %s, want 401 about the ticket", r.status, r.raw)
	}
	if s2, r := e.getStream(t, "", "/api/fleet/stream?ticket=hft_forged", ""); s2 != nil || r.status != http.StatusUnauthorized {
		t.Errorf("a forged ticket = %d %s, want 401", r.status, r.raw)
	}
	bobs, _ := e.getStream(t, "", "/api/fleet/stream?ticket="+ticket(bob), "")
	if snap, err := bobs.next(); err != nil || strings.Contains(snapJSON(snap), "s1") {
		t.Errorf("bob's fleet: %v %v, want it without ada's s1", snap, err)
	}
	if r := e.do(t, "POST", "/api/sessions/s1/turns", ada, `{"prompt": "echo '{\"type\":\"hello\"}'"}`); r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	var lastID string
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("waiting for s1's turn to end: %v", err)
		}
		lastID = ev.id
		if ev.name == "agent" && ev.data["state"] == "done" {
			break
		}
	}
	// A client that reconnects with the last id it saw gets what came after, no snapshot; one
	// with an id this server never sent gets a snapshot that says so.
	resumed, r := e.getStream(t, ada, "/api/fleet/stream", lastID)
	if resumed == nil {
		t.Fatalf("resume = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "DELETE", "/api/sessions/s1", ada, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE session = %d %s", r.status, r.raw)
	}
	// What came after lastID (the summary that went out with the agent event, say), then the
	// gone: never a snapshot.
	for {
		ev, err := resumed.next()
		if err != nil || ev.name == "snapshot" {
			t.Fatalf("after resuming: %v %v, want the changes after %s and then gone, no snapshot", ev, err, lastID)
		}
		if ev.name == "gone" {
			break
		}
	}
	stale, _ := e.getStream(t, ada, "/api/fleet/stream", "12")
	if ev, err := stale.next(); err != nil || ev.name != "snapshot" || !strings.Contains(fmt.Sprint(ev.data["reset"]), "Last-Event-ID 12") {
		t.Errorf("an id never sent: %v %v, want a snapshot saying so", ev, err)
	}
	if r := e.do(t, "DELETE", "/api/tokens/"+adaID, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", r.status, r.raw)
	}
	end := s.until(t, "close")
	if reason := end[len(end)-1].data["reason"]; reason != "revoked" {
		t.Errorf("after revocation the stream closed with %v, want revoked", reason)
	}
}

func snapJSON(ev sseEvent) string {
	var b strings.Builder
	for _, a := range ev.data["agents"].([]any) {
		b.WriteString(`"name":"` + a.(map[string]any)["name"].(string) + `",`)
	}
	return b.String()
}

// failedProcess starts a process that exits 3 in sandbox and returns its id once it has ended:
// an item in its person's inbox.
func (e *env) failedProcess(t *testing.T, tok, sandbox string) string {
	t.Helper()
	id := e.startProcess(t, tok, sandbox, "exit 3")
	s, r := e.attach(t, tok, sandbox, id, "", "")
	if s == nil {
		t.Fatalf("attach %s = %d %s", id, r.status, r.raw)
	}
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("waiting for %s to end: %v", id, err)
		}
		if ev.name == "end" {
			return id
		}
	}
}

// TestDismissOverHTTP: DELETE /api/fleet/inbox/{item} takes the item out of the person's inbox
// for good; a second time, or an item that is not there, is a 404 that says why.
func TestDismissOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	item := "process_failed:" + e.failedProcess(t, ada, "box")
	inbox := func() string {
		r := e.do(t, "GET", "/api/fleet", ada, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /api/fleet = %d %s", r.status, r.raw)
		}
		b, _ := json.Marshal(r.body["inbox"])
		return string(b)
	}
	if got := inbox(); !strings.Contains(got, item) {
		t.Fatalf("inbox %s, want %s in it", got, item)
	}
	// As a browser sends it: encodeURIComponent escapes the id's colon.
	if r := e.do(t, "DELETE", "/api/fleet/inbox/"+strings.ReplaceAll(item, ":", "%3A"), ada, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE /api/fleet/inbox/%s = %d %s, want 204", item, r.status, r.raw)
	}
	if got := inbox(); strings.Contains(got, item) {
		t.Errorf("inbox after the dismissal %s, want it gone", got)
	}
	if r := e.do(t, "DELETE", "/api/fleet/inbox/"+item, ada, ""); r.status != http.StatusNotFound || !strings.Contains(r.raw, "not in your inbox") {
		t.Errorf("dismissing it again = %d %s, want 404 saying it is not in the inbox", r.status, r.raw)
	}
}

// endedProcess waits for process id to end, following its stream.
func (e *env) endedProcess(t *testing.T, tok, sandbox, id string) {
	t.Helper()
	s, r := e.attach(t, tok, sandbox, id, "", "")
	if s == nil {
		t.Fatalf("attach %s = %d %s", id, r.status, r.raw)
	}
	s.until(t, "end")
}

// TestFleetRowsOverHTTP: GET /api/fleet gives each agent its task, its turn's start and end,
// its last activity and its tokens; its inbox says a turn is done and waits, and has the
// process that failed but not the one killed on purpose (DELETE).
func TestFleetRowsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	e.sandbox(t, ada, "box", "")
	if r := e.do(t, "POST", "/api/sessions", ada, `{"name": "s1", "sandbox": "box", "agent": "command"}`); r.status != http.StatusCreated {
		t.Fatalf("POST /api/sessions = %d %s", r.status, r.raw)
	}
	prompt := `echo '{"type":"turn.completed","usage":{"input_tokens":12,"output_tokens":3}}'`
	b, _ := json.Marshal(map[string]string{"prompt": prompt + "\n# and nothing else"})
	if r := e.do(t, "POST", "/api/sessions/s1/turns", ada, string(b)); r.status != http.StatusAccepted {
		t.Fatalf("POST turns = %d %s", r.status, r.raw)
	}
	failed := e.failedProcess(t, ada, "box")
	killed := e.startProcess(t, ada, "box", "sleep 100")
	if r := e.do(t, "DELETE", "/api/sandboxes/box/processes/"+killed, ada, ""); r.status != http.StatusAccepted {
		t.Fatalf("DELETE %s = %d %s", killed, r.status, r.raw)
	}
	e.endedProcess(t, ada, "box", killed)
	tk := e.do(t, "POST", "/api/fleet/tickets", ada, "")
	s, r := e.getStream(t, "", "/api/fleet/stream?ticket="+tk.body["ticket"].(string), "")
	if s == nil {
		t.Fatalf("stream = %d %s", r.status, r.raw)
	}
	for ev, err := s.next(); ; ev, err = s.next() { // until the turn is done
		if err != nil {
			t.Fatalf("waiting for s1's turn to end: %v", err)
		}
		agents, _ := ev.data["agents"].([]any)
		if ev.name == "agent" && ev.data["state"] == "done" || len(agents) == 1 && agents[0].(map[string]any)["state"] == "done" {
			break
		}
	}
	var f wire.Fleet
	if r := e.do(t, "GET", "/api/fleet", ada, ""); r.status != http.StatusOK || json.Unmarshal([]byte(r.raw), &f) != nil || len(f.Agents) != 1 {
		t.Fatalf("GET /api/fleet = %d %s", r.status, r.raw)
	}
	u := f.Agents[0]
	if u.Task != prompt || u.Turn == nil || u.Turn.StartedAt == nil || u.EndedAt == nil || u.LastActivityAt == nil ||
		u.Tokens == nil || *u.Tokens != (wire.Tokens{Input: 12, Output: 3}) {
		t.Errorf("the agent: %s", r.raw)
	}
	items := map[string]string{}
	for _, it := range f.Inbox {
		items[it.ID] = it.Text
	}
	if items["turn_done:"+u.Turn.ID] != "s1 is done, waiting for you: "+prompt || items["process_failed:"+failed] != "exit 3 ("+failed+" in box) exited with code 3" ||
		items["process_failed:"+killed] != "" || len(items) != 2 {
		t.Errorf("inbox %+v; want s1 waiting and %s failed, not %s (killed on purpose)", items, failed, killed)
	}
}
