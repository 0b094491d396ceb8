package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// update is one notifications/resources/updated a subscriber got.
type update struct {
	uri  string
	meta map[string]any
	at   time.Time // on the test's clock
}

// subscriber is an MCP client of one era that collects the resource updates it gets.
type subscriber struct {
	era     string
	session *mcp.ClientSession
	updates chan update
}

func (e *env) subscriber(t *testing.T, token, era string, clock quartz.Clock) *subscriber {
	t.Helper()
	if clock == nil {
		clock = quartz.NewReal()
	}
	s := &subscriber{era: era, updates: make(chan update, 100)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "hangar-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			s.updates <- update{uri: req.Params.URI, meta: req.Params.Meta, at: clock.Now()}
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, e.http.Transport}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	s.session = cs
	return s
}

// subscribe subscribes to uri and returns once hangar holds the subscription (tokenID holds one
// more stream). A 2026-07-28 client's Subscribe is a subscriptions/listen that the go-sdk
// client (v1.8.0) runs in the background, returning nil at once whatever the answer: refusals
// are checked with refusal.
func (s *subscriber) subscribe(t *testing.T, e *env, tokenID, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, before := e.streams.Count(tokenID)
	if err := s.session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
	waitFor(t, "the subscription to "+uri, func() bool { _, n := e.streams.Count(tokenID); return n > before })
}

// refusal subscribes to uri and returns the JSON-RPC error the subscription is refused with
// (0 and "" if it is not refused).
func (s *subscriber) refusal(t *testing.T, e *env, token, uri string) (int, string) {
	t.Helper()
	if s.era >= "2026" {
		return e.listenRaw(t, token, uri)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := s.session.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	var we *jsonrpc.Error
	if err != nil && !errors.As(err, &we) {
		t.Fatalf("subscribe %s: %v, not a JSON-RPC error", uri, err)
	}
	if we == nil {
		return 0, ""
	}
	return int(we.Code), we.Message
}

// next waits for the next update.
func (s *subscriber) next(t *testing.T) update {
	t.Helper()
	select {
	case u := <-s.updates:
		return u
	case <-time.After(callTimeout):
		t.Fatalf("%s: no notifications/resources/updated within %s", s.era, callTimeout)
		return update{}
	}
}

// read reads an event resource and decodes its page.
func (s *subscriber) read(t *testing.T, uri string) (events []map[string]any, next int64, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := s.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, 0, err
	}
	var page struct {
		Events []map[string]any `json:"events"`
		Next   int64            `json:"next"`
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: contents %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &page); err != nil {
		t.Fatalf("read %s: %v: %s", uri, err, res.Contents[0].Text)
	}
	return page.Events, page.Next, nil
}

// userToken makes a token for user with scopes and returns its id and secret.
func (e *env) userToken(t *testing.T, user string, scopes ...string) (string, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"user": user, "scopes": scopes})
	return e.newToken(t, string(b))
}

// session makes a session of the command agent in sandbox.
func (e *env) session(t *testing.T, token, name, sandbox string) {
	t.Helper()
	if status, out := e.do(t, "POST", "/api/sessions", token, `{"name": "`+name+`", "sandbox": "`+sandbox+`", "agent": "command"}`); status != http.StatusCreated {
		t.Fatalf("create session %s = %d %v", name, status, out)
	}
}

// turn starts a turn whose prompt is a bash command printing JSON lines, and returns its id.
func (e *env) turn(t *testing.T, token, session, command string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"prompt": command})
	status, out := e.do(t, "POST", "/api/sessions/"+session+"/turns", token, string(b))
	if status != http.StatusAccepted {
		t.Fatalf("start turn in %s = %d %v", session, status, out)
	}
	return out["id"].(string)
}

// TestSubscriptionEras: a client of each era subscribes to a session's events, is told of new
// ones as a turn records them, and reads them with since until the turn's end; notifications
// carry a 2026-07-28 listen's id and never hangar's own mark.
func TestSubscriptionEras(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	tokID, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			name := "watched-" + era[:4]
			e.session(t, tok, name, "box")
			uri := "hangar://sessions/" + name + "/events"
			s := e.subscriber(t, tok, era, nil)
			s.subscribe(t, e, tokID, uri)
			e.turn(t, tok, name, `echo '{"type":"hello"}'; echo '{"type":"bye"}'`)
			var seen []string
			var since int64
			for !slices.Contains(seen, "turn.finished") {
				u := s.next(t)
				if u.uri != uri {
					t.Fatalf("update for %s, want %s", u.uri, uri)
				}
				if _, ok := u.meta["hangar.dev/subscription"]; ok {
					t.Errorf("hangar's own mark reached the client: %v", u.meta)
				}
				if _, ok := u.meta[mcp.MetaKeySubscriptionID]; ok != (era >= "2026") {
					t.Errorf("%s: subscription id in _meta = %v", era, u.meta)
				}
				evs, next, err := s.read(t, fmt.Sprintf("%s?since=%d", uri, since))
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				for _, ev := range evs {
					seen = append(seen, ev["type"].(string))
				}
				since = next
			}
			if want := []string{"turn.started", "hello", "bye", "turn.finished"}; !slices.Equal(seen, want) {
				t.Errorf("events read = %v, want %v", seen, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			if err := s.session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatalf("unsubscribe: %v", err)
			}
			waitFor(t, "the subscription's stream to close", func() bool { _, n := e.streams.Count(tokID); return n == 0 })
		})
	}
}

// waitFor polls cond until it holds, failing after pollTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", pollTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSubscriptionCoalesces: the first update is sent at once; one that comes sooner than
// 250 ms after it waits for the window's end, and one notification then covers everything
// recorded meanwhile; once the window has passed, the next is sent at once again.
func TestSubscriptionCoalesces(t *testing.T) {
	t.Parallel()
	clock := quartz.NewMock(t)
	e := newEnv(t, envOptions{turns: true, clock: clock})
	tokID, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	e.session(t, tok, "paced", "box")
	uri := "hangar://sessions/paced/events"
	s := e.subscriber(t, tok, eras[0], clock)
	s.subscribe(t, e, tokID, uri)
	// The agent prints line i once the test makes file go<i>.
	dir := t.TempDir()
	gate := func(i int) {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("go%d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recorded := func(n int) func() bool {
		return func() bool {
			_, out := e.do(t, "GET", "/api/sessions/paced/events", tok, "")
			evs, _ := out["events"].([]any)
			return len(evs) >= n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	timers := clock.Trap().NewTimer("stream", "coalesce")
	defer timers.Close()

	e.turn(t, tok, "paced", `for i in 1 2 3; do until [ -e `+dir+`/go$i ]; do sleep 0.02; done; echo "{\"type\":\"step$i\"}"; done`)
	t0 := clock.Now()
	if u := s.next(t); !u.at.Equal(t0) { // turn.started: at once
		t.Fatalf("first update at %v, want at once (%v)", u.at, t0)
	}
	gate(1) // step1 comes within the window: the subscription waits for the window's end
	timers.MustWait(ctx).MustRelease(ctx)
	gate(2) // and step2 while it waits
	waitFor(t, "step2 to be recorded", recorded(3))
	clock.Advance(updateEvery).MustWait(ctx)
	u := s.next(t)
	if !u.at.Equal(t0.Add(updateEvery)) {
		t.Errorf("second update at %v, want at the window's end %v", u.at, t0.Add(updateEvery))
	}
	evs, _, err := s.read(t, uri+"?since=1")
	if err != nil || len(evs) != 2 || evs[0]["type"] != "step1" || evs[1]["type"] != "step2" {
		t.Fatalf("after the second update, read since=1 = %v, %v; want step1 and step2", evs, err)
	}
	clock.Advance(updateEvery).MustWait(ctx) // a quiet window passes
	gate(3)                                  // step3 (and the turn's end): at once
	if u := s.next(t); !u.at.Equal(t0.Add(2 * updateEvery)) {
		t.Errorf("third update at %v, want at once (%v)", u.at, t0.Add(2*updateEvery))
	}
	select {
	case u := <-s.updates:
		t.Errorf("an extra update: %+v", u)
	default:
	}
}

// updateEvery is the subscriptions' window (stream.UpdateEvery).
const updateEvery = 250 * time.Millisecond

// TestSubscriptionIsolation: a caller who may not read a session or job cannot read or
// subscribe to it, gets the very error a URI of nothing gets, does not see it listed, and is
// never told of its updates, even through a URI string that once meant their own session.
func TestSubscriptionIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	adaID, ada := e.userToken(t, "ada", "user", "mcp")
	bobID, bob := e.userToken(t, "bob", "user", "mcp")
	e.sandbox(t, ada, "ada-box", "")
	e.sandbox(t, bob, "bob-box", "")
	e.session(t, ada, "secret", "ada-box")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			b := e.subscriber(t, bob, era, nil)
			_, _, errSecret := b.read(t, "hangar://sessions/secret/events")
			_, _, errNothing := b.read(t, "hangar://sessions/nothing/events")
			if errSecret == nil || errNothing == nil || errSecret.Error() != errNothing.Error() {
				t.Errorf("bob reading ada's session: %v; reading nothing: %v; want the same not found", errSecret, errNothing)
			}
			codeSecret, msgSecret := b.refusal(t, e, bob, "hangar://sessions/secret/events")
			codeNothing, msgNothing := b.refusal(t, e, bob, "hangar://sessions/nothing/events")
			if codeSecret != jsonrpc.CodeInvalidParams || codeSecret != codeNothing || msgSecret != msgNothing {
				t.Errorf("bob subscribing to ada's session: %d %q; to nothing: %d %q; want the same not found", codeSecret, msgSecret, codeNothing, msgNothing)
			}
			if _, n := e.streams.Count(bobID); n != 0 {
				t.Errorf("bob holds %d streams after being refused", n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			list, err := b.session.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.Resources {
				if strings.Contains(r.URI, "secret") {
					t.Errorf("bob's resources/list shows %s", r.URI)
				}
			}

			// bob subscribes to his session "shared", then deletes it; ada makes hers of that
			// name and runs a turn in it. bob's subscription is to his session, gone: ada's
			// updates, sent for the same URI string, must not reach him.
			shared := "shared-" + era[:4]
			uri := "hangar://sessions/" + shared + "/events"
			e.session(t, bob, shared, "bob-box")
			b.subscribe(t, e, bobID, uri)
			if status, out := e.do(t, "DELETE", "/api/sessions/"+shared, bob, ""); status != http.StatusNoContent {
				t.Fatalf("delete = %d %v", status, out)
			}
			e.session(t, ada, shared, "ada-box")
			a := e.subscriber(t, ada, era, nil)
			a.subscribe(t, e, adaID, uri)
			e.turn(t, ada, shared, `echo '{"type":"private"}'`)
			// Two updates: the second is sent after the first ResourceUpdated call returned,
			// so whatever that call sent bob is on his stream before his probe's update below.
			// A turn may make only one (its events can all be recorded before the feeder
			// reads them, one window's news), so a second turn, started once ada was told of
			// the first and it finished, makes sure there is news after the first update.
			a.next(t)
			waitFor(t, "ada's turn to finish", func() bool {
				evs, _, err := a.read(t, uri)
				return err == nil && slices.ContainsFunc(evs, func(ev map[string]any) bool { return ev["type"] == "turn.finished" })
			})
			e.turn(t, ada, shared, `echo '{"type":"private"}'`)
			a.next(t)
			probe := "probe-" + era[:4]
			e.session(t, bob, probe, "bob-box")
			b.subscribe(t, e, bobID, "hangar://sessions/"+probe+"/events")
			e.turn(t, bob, probe, `echo '{"type":"mine"}'`)
			if u := b.next(t); u.uri != "hangar://sessions/"+probe+"/events" {
				t.Errorf("bob was told of %s", u.uri)
			}
		})
	}
}

// TestJobsTokenSubscriptions: a jobs+mcp token reads and subscribes to its own job's events,
// and another user's jobs+mcp token gets not found for them and lists none. (Another token of
// the same user sees them: at /mcp, the mcp scope reaches its user's jobs, and jobs beside it
// restricts nothing; TestScopesAddUp.)
func TestJobsTokenSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, user := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, user, "box", "")
	ownID, own := e.userToken(t, "ada", "jobs", "mcp")
	otherID, other := e.userToken(t, "bob", "jobs", "mcp")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			o := e.subscriber(t, own, era, nil)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			res, err := o.session.CallTool(ctx, &mcp.CallToolParams{Name: "job", Arguments: map[string]any{
				"action": "start", "prompt": `echo '{"type":"job-line"}'`, "agent": "command", "sandbox": "box"}})
			if err != nil || res.IsError {
				t.Fatalf("job start: %v %+v", err, res)
			}
			id := res.StructuredContent.(map[string]any)["id"].(string)
			uri := "hangar://jobs/" + id + "/events"
			if _, _, err := o.read(t, uri); err != nil {
				t.Errorf("the job's own token cannot read it: %v", err)
			}
			o.subscribe(t, e, ownID, uri)
			x := e.subscriber(t, other, era, nil)
			if _, _, err := x.read(t, uri); err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("another jobs token reads the job: %v", err)
			}
			if code, msg := x.refusal(t, e, other, uri); code != jsonrpc.CodeInvalidParams {
				t.Errorf("another jobs token subscribing to the job: %d %q, want not found", code, msg)
			}
			if _, n := e.streams.Count(otherID); n != 0 {
				t.Errorf("another jobs token holds %d streams", n)
			}
			list, err := x.session.ListResources(ctx, nil)
			if err != nil || len(list.Resources) != 0 {
				t.Errorf("another jobs token lists %v, %v", list, err)
			}
			list, err = o.session.ListResources(ctx, nil)
			if err != nil || !slices.ContainsFunc(list.Resources, func(r *mcp.Resource) bool { return r.URI == uri }) {
				t.Errorf("the job's token lists %v, %v; want %s", list, err, uri)
			}
		})
	}
}

// TestReadSince: reads page by the since given, with next to go on; a bad since or a URI that
// is no event resource is invalid params, with a sentence.
func TestReadSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	e.session(t, tok, "paged", "box")
	e.turn(t, tok, "paged", `for i in 1 2 3; do echo "{\"n\":$i}"; done`)
	waitFor(t, "the turn to end", func() bool {
		_, out := e.do(t, "GET", "/api/sessions/paged/events?since=4", tok, "")
		evs, _ := out["events"].([]any)
		return len(evs) == 1
	})
	s := e.subscriber(t, tok, eras[1], nil)
	uri := "hangar://sessions/paged/events"
	for _, tc := range []struct {
		since    string
		seqs     []float64
		wantNext int64
	}{
		{"", []float64{1, 2, 3, 4, 5}, 5},
		{"?since=2", []float64{3, 4, 5}, 5},
		{"?since=5", nil, 5},
		{"?since=99", nil, 99},
	} {
		evs, next, err := s.read(t, uri+tc.since)
		if err != nil {
			t.Errorf("read %s: %v", tc.since, err)
			continue
		}
		var seqs []float64
		for _, ev := range evs {
			seqs = append(seqs, ev["seq"].(float64))
		}
		if !slices.Equal(seqs, tc.seqs) || next != tc.wantNext {
			t.Errorf("read %q: seqs %v next %d, want %v next %d", tc.since, seqs, next, tc.seqs, tc.wantNext)
		}
	}
	for _, bad := range []string{uri + "?since=x", uri + "?since=-1", uri + "?limit=3", "hangar://sessions/paged/turns"} {
		_, _, err := s.read(t, bad)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("read %s: %v, want invalid params", bad, err)
		}
	}
	_, _, err := s.read(t, uri+"?since=x")
	if err == nil || !strings.Contains(err.Error(), "since must be an event's seq") {
		t.Errorf("a bad since: %v, want a sentence about since", err)
	}
	if _, _, err := s.read(t, uri+"?since=0&limit=3"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a parameter the resource does not take: %v, want a sentence naming it", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	tmpl, err := s.session.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 2 {
		t.Fatalf("resource templates: %v %v", tmpl, err)
	}
	// With the turns, hangar declares resources it can subscribe to, and no list changes (it
	// sends none).
	caps := e.subscriber(t, tok, eras[0], nil).session.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || caps.Resources.ListChanged || caps.Tools == nil {
		t.Errorf("capabilities = %+v, want tools and subscribable resources", caps)
	}
}

// TestListenWire reads a 2026-07-28 subscriptions/listen as raw SSE: the acknowledgement
// first, then updates tagged with the listen's id, and the final result when hangar shuts down.
func TestListenWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	_, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	e.session(t, tok, "wired", "box")
	next := e.listen(t, tok, "hangar://sessions/wired/events")
	if m := next(); m["method"] != "notifications/subscriptions/acknowledged" || subscriptionID(m) != "listen-7" {
		t.Fatalf("first message %v, want the acknowledgement for listen-7", m)
	}
	e.turn(t, tok, "wired", `echo '{"type":"x"}'`)
	m := next()
	if m["method"] != "notifications/resources/updated" || subscriptionID(m) != "listen-7" {
		t.Fatalf("message %v, want an update tagged listen-7", m)
	}
	if uri := m["params"].(map[string]any)["uri"]; uri != "hangar://sessions/wired/events" {
		t.Errorf("update for %v", uri)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := e.mcp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	finalResult(t, next)
}

// TestRevokedTokenEndsSubscriptions: a revoked token's subscriptions end: a 2026-07-28 listen
// with its final result, and in both eras the subscription's place in the registry is freed.
func TestRevokedTokenEndsSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{turns: true})
	tokID, tok := e.userToken(t, "ada", "user", "mcp")
	e.sandbox(t, tok, "box", "")
	e.session(t, tok, "revoked", "box")
	uri := "hangar://sessions/revoked/events"
	s := e.subscriber(t, tok, eras[0], nil)
	s.subscribe(t, e, tokID, uri)
	next := e.listen(t, tok, uri)
	if m := next(); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v, want the acknowledgement", m)
	}
	if _, n := e.streams.Count(tokID); n != 2 {
		t.Fatalf("the token holds %d streams, want its 2 subscriptions", n)
	}
	if status, out := e.do(t, "DELETE", "/api/tokens/"+tokID, e.admin, ""); status != http.StatusNoContent {
		t.Fatalf("revoke = %d %v", status, out)
	}
	finalResult(t, next)
	waitFor(t, "the revoked token's subscriptions to end", func() bool { _, n := e.streams.Count(tokID); return n == 0 })
}

// listen opens a raw 2026-07-28 subscriptions/listen (id "listen-7") for uri and returns a
// function that reads its next SSE message.
func (e *env) listen(t *testing.T, token, uri string) func() map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"listen-7","method":"subscriptions/listen","params":{"notifications":` +
		`{"resourceSubscriptions":["` + uri + `"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen: status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	return func() map[string]any {
		t.Helper()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read the listen's SSE: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("SSE data is not JSON: %q", data)
				}
				return m
			}
		}
	}
}

// subscriptionID is a message's _meta subscription id (a notification's or a result's).
func subscriptionID(m map[string]any) any {
	for _, k := range []string{"params", "result"} {
		if p, ok := m[k].(map[string]any); ok {
			meta, _ := p["_meta"].(map[string]any)
			return meta[mcp.MetaKeySubscriptionID]
		}
	}
	return nil
}

// finalResult reads a listen's messages until its final result, which must be listen-7's.
func finalResult(t *testing.T, next func() map[string]any) {
	t.Helper()
	for {
		m := next()
		if m["method"] == "notifications/resources/updated" {
			continue // sent before the end
		}
		if m["id"] != "listen-7" || m["result"] == nil || subscriptionID(m) != "listen-7" {
			t.Fatalf("%v, want listen-7's final result", m)
		}
		return
	}
}

// listenRaw sends a 2026-07-28 subscriptions/listen for uri and returns the JSON-RPC error it
// is refused with (0 and "" when it is acknowledged: the listen is then dropped). The go-sdk
// client v1.8.0's Subscribe returns nil when a listen is refused, so refusals are read raw.
func (e *env) listenRaw(t *testing.T, token, uri string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":` +
		`{"resourceSubscriptions":["` + uri + `"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, _ := r.ReadString('\n')
	for strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && !strings.HasPrefix(line, "data: ") {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("listen %s: %v", uri, err)
		}
	}
	var m struct {
		Method string `json:"method"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
		t.Fatalf("listen %s: %q is not JSON", uri, line)
	}
	if m.Error != nil {
		return m.Error.Code, m.Error.Message
	}
	if m.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("listen %s: first message %q", uri, line)
	}
	return 0, ""
}
