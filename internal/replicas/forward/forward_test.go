package forward

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 10 * time.Second

var ada = auth.Principal{TokenID: "tok_ada", User: "ada"}

// front serves every request by forwarding it to target.
func front(t *testing.T, f *Forwarder, target string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.To(w, r, ada, "box", target, nil, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "owner down: "+err.Error(), http.StatusServiceUnavailable)
		}, nil)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamsAsWritten: the owner's SSE answer reaches the client event by event (the second
// is written only once the client has the first), with the request as it came and the
// forwarding header; the forwarding counts as one stream of this replica while it lasts.
func TestStreamsAsWritten(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	gotFirst := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(Header) != "http://a" || r.Header.Get("Authorization") != "Bearer x" || r.URL.Path != "/api/sandboxes/box/processes/p_1/stream" || r.URL.RawQuery != "since=3" {
			http.Error(w, "not as it came", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: output\ndata: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: end\ndata: two\n\n")
	}))
	defer owner.Close()
	f := &Forwarder{Self: "http://a", Streams: streams}
	srv := front(t, f, owner.URL)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/sandboxes/box/processes/p_1/stream?since=3", nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	rd := bufio.NewReader(resp.Body)
	for line := ""; line != "data: one\n"; {
		if line, err = rd.ReadString('\n'); err != nil {
			t.Fatalf("the first event did not come before the second was written: %v", err)
		}
	}
	if total, _ := streams.Count(""); total != 1 {
		t.Errorf("%d streams open while forwarding, want 1", total)
	}
	close(gotFirst)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "data: two") {
		t.Errorf("the rest = %q", rest)
	}
}

// TestOwnerDown: an owner that does not answer gets the fail answer.
func TestOwnerDown(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	owner := httptest.NewServer(http.NotFoundHandler())
	gone := owner.URL
	owner.Close()
	srv := front(t, &Forwarder{Self: "http://a", Streams: streams}, gone)
	resp, err := http.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "owner down") {
		t.Errorf("= %d %s, want the fail answer", resp.StatusCode, b)
	}
}

// TestEndedHere: the sandbox's end on this replica ends a forwarding in flight.
func TestEndedHere(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an owner that never ends by itself
	}))
	defer owner.Close()
	srv := front(t, &Forwarder{Self: "http://a", Streams: streams}, owner.URL)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	streams.EndSandbox("box", stream.ReasonDestroyed)
	if _, err := io.ReadAll(rd); ctx.Err() != nil {
		t.Fatalf("the forwarding did not end with the sandbox: %v", err)
	}
}

// TestOwnerMovesWhileUnreachable: a request whose owner cannot be reached is not failed: the
// replicas are told (to look for dead ones), the owner asked again until it names another
// replica, and the request — its body included — goes there; or, once the sandbox is this
// replica's, it is served here.
func TestOwnerMovesWhileUnreachable(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	echo := func(who string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, who+" got "+string(b))
		})
	}
	alive := httptest.NewServer(echo("new owner"))
	defer alive.Close()
	for _, tc := range []struct {
		name, then, want string
	}{
		{"to the new owner", alive.URL, "new owner got hello"},
		{"served here", "", "here got hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			told, asked := 0, 0
			f := &Forwarder{Self: "http://a", Streams: streams, Unreachable: func(context.Context, string) { told++ }}
			owner := func(context.Context) (string, error) {
				asked++
				if asked < 3 { // not seen dead yet
					return dead.URL, nil
				}
				return tc.then, nil
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.To(w, r, ada, "box", dead.URL, owner, echo("here"), func(w http.ResponseWriter, r *http.Request, err error) {
					http.Error(w, "owner down: "+err.Error(), http.StatusServiceUnavailable)
				}, nil)
			}))
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/x", "text/plain", strings.NewReader("hello"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != tc.want {
				t.Errorf("= %d %q, want 200 %q", resp.StatusCode, b, tc.want)
			}
			if told != 3 || asked != 3 {
				t.Errorf("the replicas were told %d times and the owner asked %d times, want 3 and 3", told, asked)
			}
		})
	}
}

// TestOwnerMovedOnTheWay: a replica that answers a forwarded request saying it no longer owns
// the sandbox (its lease moved meanwhile) is not the client's answer: the owner is asked again
// and the request — a POST, which was not done — goes to the new owner.
func TestOwnerMovedOnTheWay(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(MovedHeader, "http://elsewhere")
		http.Error(w, "not mine", http.StatusServiceUnavailable)
	}))
	defer moved.Close()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "owner got "+string(b))
	}))
	defer owner.Close()
	f := &Forwarder{Self: "http://a", Streams: streams}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		again := func(context.Context) (string, error) { return owner.URL, nil }
		f.To(w, r, ada, "box", moved.URL, again, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "failed: "+err.Error(), http.StatusServiceUnavailable)
		}, nil)
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/x", "text/plain", strings.NewReader("input"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "owner got input" {
		t.Errorf("= %d %q, want 200 from the new owner", resp.StatusCode, b)
	}
}

// closeEvent writes the last event as the REST transport does.
func closeEvent(w http.ResponseWriter, reason stream.Reason) {
	io.WriteString(w, "event: close\ndata: {\"reason\":\""+string(reason)+"\"}\n\n")
	w.(http.Flusher).Flush()
}

// TestShutdownEndsStreamCleanly: this replica's shutdown ends a GET stream it forwards as it
// ends its own: after the owner's last whole event comes the close event with reason shutdown,
// then a clean end of the response (no broken connection), so the client resumes elsewhere. A
// stream cut in the middle of an event gets no close event (it would end the cut one), but
// ends cleanly too.
func TestShutdownEndsStreamCleanly(t *testing.T) {
	for _, tc := range []struct {
		name, written, want string
	}{
		{"between events", "id: 1\nevent: output\ndata: one\n\n", "id: 1\nevent: output\ndata: one\n\nevent: close\ndata: {\"reason\":\"shutdown\"}\n\n"},
		{"within an event", "id: 1\nevent: output\ndata: one\n", "id: 1\nevent: output\ndata: one\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := stream.New(stream.Config{})
			owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.written)
				w.(http.Flusher).Flush()
				<-r.Context().Done() // an owner that never ends by itself
			}))
			defer owner.Close()
			f := &Forwarder{Self: "http://a", Streams: streams}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.To(w, r, ada, "box", owner.URL, nil, nil, func(w http.ResponseWriter, r *http.Request, err error) {
					http.Error(w, "owner down: "+err.Error(), http.StatusServiceUnavailable)
				}, closeEvent)
			}))
			defer srv.Close()

			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/sandboxes/box/processes/p_1/stream", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := make([]byte, len(tc.written))
			if _, err := io.ReadFull(resp.Body, got); err != nil {
				t.Fatal(err)
			}
			streams.Shutdown()
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Errorf("the stream broke (%v) after %q, want a clean end", err, rest)
			}
			if s := string(got) + string(rest); s != tc.want {
				t.Errorf("the client got %q, want %q", s, tc.want)
			}
		})
	}
}

// TestShutdownLetsRequestAnswer: a POST in flight (an MCP session's tools/call, whose answer is
// an SSE stream ending with the result) is not cut by this replica's shutdown: its answer
// comes whole, within the server's shutdown grace.
func TestShutdownLetsRequestAnswer(t *testing.T) {
	streams := stream.New(stream.Config{})
	release := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: progress\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message\ndata: result of "+string(b)+"\n\n")
	}))
	defer owner.Close()
	f := &Forwarder{Self: "http://a", Streams: streams}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.To(w, r, ada, "", owner.URL, nil, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "owner down: "+err.Error(), http.StatusServiceUnavailable)
		}, nil)
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/mcp", strings.NewReader("exec"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for line := ""; line != "data: progress\n"; {
		if line, err = rd.ReadString('\n'); err != nil {
			t.Fatalf("no progress before the shutdown: %v", err)
		}
	}
	streams.Shutdown()
	close(release)
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), "data: result of exec") {
		t.Errorf("after the shutdown the answer went on with %q, %v; want its result and a clean end", rest, err)
	}
}

// TestRevokedRequestBreaks: a POST in flight is cut by the token's revocation, and its client
// sees the answer break rather than a part of it passed off as whole.
func TestRevokedRequestBreaks(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: progress\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the result never comes
	}))
	defer owner.Close()
	f := &Forwarder{Self: "http://a", Streams: streams}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.To(w, r, ada, "", owner.URL, nil, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "owner down: "+err.Error(), http.StatusServiceUnavailable)
		}, closeEvent)
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/mcp", strings.NewReader("exec"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for line := ""; line != "data: progress\n"; {
		if line, err = rd.ReadString('\n'); err != nil {
			t.Fatalf("no progress before the revocation: %v", err)
		}
	}
	streams.EndToken(ada.TokenID)
	if rest, err := io.ReadAll(rd); err == nil || ctx.Err() != nil {
		t.Errorf("after the revocation the answer ended with %q, %v; want it broken", rest, err)
	}
}

// TestMovedAfterLongHandover: an owner that answers that the lease moved only after its
// handover ended (it waits for the starts under way there, here longer than Wait) starts the
// wait for the new owner again: the request reaches it rather than failing.
func TestMovedAfterLongHandover(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	clock := quartz.NewMock(t)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clock.Advance(4 * time.Second).MustWait(r.Context()) // the handover's wait
		w.Header().Set(MovedHeader, "http://elsewhere")
		http.Error(w, "not mine", http.StatusServiceUnavailable)
	}))
	defer moved.Close()
	owner := newOwner(t)
	f := &Forwarder{Self: "http://a", Streams: streams, Wait: 3 * time.Second, Clock: clock}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		again := func(context.Context) (string, error) { return owner.URL, nil }
		f.To(w, r, ada, "box", moved.URL, again, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "failed: "+err.Error(), http.StatusServiceUnavailable)
		}, nil)
	}))
	defer srv.Close()
	wantOwnersAnswer(t, srv.URL)
}

// TestMovedUntilHandedOver: a leaving replica answers at once that the lease moved, for as
// long as its handover takes (here 5 s, longer than Wait, as a handover that waits for a turn's
// start under load): the request keeps waiting, and reaches the new owner once the lease names
// it. Counting the answers, five in the first half second, failed it.
func TestMovedUntilHandedOver(t *testing.T) {
	streams := stream.New(stream.Config{})
	defer streams.Shutdown()
	clock := quartz.NewMock(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	retries := clock.Trap().NewTimer("forward", "retry")
	defer retries.Close()
	leaving := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(MovedHeader, "shutting down")
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	}))
	defer leaving.Close()
	owner := newOwner(t)
	handed := clock.Now().Add(5 * time.Second)
	f := &Forwarder{Self: "http://a", Streams: streams, Wait: 3 * time.Second, Clock: clock}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		again := func(context.Context) (string, error) {
			if clock.Now().Before(handed) {
				return leaving.URL, nil // still the leaving replica's: its handover goes on
			}
			return owner.URL, nil
		}
		f.To(w, r, ada, "box", leaving.URL, again, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "failed: "+err.Error(), http.StatusServiceUnavailable)
		}, nil)
	}))
	defer srv.Close()
	driven := make(chan struct{})
	go func() { // time passes only between the retries
		defer close(driven)
		for {
			call, err := retries.Wait(ctx)
			if err != nil {
				return
			}
			// Released even as the test ends: trap.Close fails a test that left a call
			// unreleased. It is the call's only trap, so it completes at once.
			if call.Release(context.WithoutCancel(ctx)) != nil || clock.Advance(retryEvery).Wait(ctx) != nil {
				return
			}
		}
	}()
	wantOwnersAnswer(t, srv.URL)
	cancel()
	<-driven // before retries.Close: quartz's Trap.Close reads the count Release writes, unlocked
}

// newOwner is the sandbox's new owner: it answers "owner answered".
func newOwner(t *testing.T) *httptest.Server {
	t.Helper()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "owner answered")
	}))
	t.Cleanup(owner.Close)
	return owner
}

// wantOwnersAnswer asks url and wants the new owner's answer.
func wantOwnersAnswer(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "owner answered" {
		t.Errorf("= %d %q, want 200 from the new owner", resp.StatusCode, b)
	}
}
