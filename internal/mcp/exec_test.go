package mcp_test

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	hmcp "github.com/hangar-dev/hangar/internal/mcp"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

func TestExecStreamsProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	// Output notifications are written to the response by hangar, in the SDK's bytes: the SDK
	// sends none of them (progresswire.go).
	viaSDK := hmcp.SDKProgress(e.mcp)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			// The command goes on only when the test has seen what it printed so far.
			gate1, goOn1 := providertest.Gate(t)
			gate2, goOn2 := providertest.Gate(t)
			k := c.start(map[string]any{"sandbox": "box", "command": "printf '\\377' >&2; read _ < " + gate1 + "; echo one; read _ < " + gate2 + "; echo two"}, true)
			// Not UTF-8: base64, flagged.
			if p := c.nextProgress(t, k); p.message != "/w==" || p.encoding != "base64" || p.value != 1 {
				t.Fatalf("first progress = %+v, want base64 of \\377 at 1 byte", p)
			}
			goOn1()
			if p := c.nextProgress(t, k); p.message != "one\n" || p.value != 5 {
				t.Fatalf("second progress = %+v, want one\\n at 5 bytes", p)
			}
			// The command waits for the test before it prints more: its result cannot have come.
			if k.finished() {
				t.Fatal("the result came with the first line: the output was not streamed")
			}
			goOn2()
			if p := c.nextProgress(t, k); p.message != "two\n" || p.value != 9 {
				t.Errorf("third progress = %+v, want two\\n at 9 bytes", p)
			}
			res := k.wait(t)
			if res.IsError {
				t.Fatalf("tool error: %v", res.Content)
			}
			out := structured(t, res)
			if out["exit_code"] != 0.0 || out["streamed"] != true || out["via"] != "daemon" ||
				out["stdout"] != "one\ntwo\n" || out["stderr"] != "/w==" || out["stderr_encoding"] != "base64" {
				t.Errorf("result = %v", out)
			}
			if _, closed := out["closed"]; closed {
				t.Errorf("a call that ended by itself says closed: %v", out)
			}
			if len(res.Content) == 0 {
				t.Error("no text content")
			}
			c.session.Close() // waits for the notification handlers still running, if any
			select {
			case p := <-c.progress:
				t.Errorf("progress after the result: %+v", p)
			default:
			}
			if n := viaSDK.Load(); n != 0 {
				t.Errorf("the SDK sent %d output notifications; hangar writes them itself", n)
			}
		})
	}
}

func TestExecWithoutStreaming(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			// stream: true without a progress token, and no stream at all: a plain exec.
			for _, stream := range []bool{false, true} {
				args := map[string]any{"sandbox": "box", "command": "echo hi; echo oops >&2; exit 3"}
				if stream {
					args["stream"] = true
				}
				out := structured(t, c.start(args, false).wait(t))
				if out["exit_code"] != 3.0 || out["stdout"] != "hi\n" || out["stderr"] != "oops\n" || out["streamed"] != false {
					t.Errorf("stream=%v: result = %v", stream, out)
				}
			}
			if len(c.progress) != 0 {
				t.Errorf("%d progress notifications for unstreamed calls", len(c.progress))
			}
		})
	}
}

func TestExecNoDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "plain", `, "daemon": false`)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			res := c.start(map[string]any{"sandbox": "plain", "command": "echo hi"}, true).wait(t)
			out := structured(t, res)
			if out["streamed"] != false || out["stdout"] != "hi\n" || out["via"] != "provider" || out["exit_code"] != 0.0 {
				t.Errorf("result = %v", out)
			}
			if len(c.progress) != 0 {
				t.Errorf("%d progress notifications without a daemon", len(c.progress))
			}
		})
	}
}

func TestExecToolErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[1])
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown sandbox", map[string]any{"sandbox": "nope", "command": "true"}, "no such sandbox"},
		{"no sandbox", map[string]any{"command": "true"}, "which sandbox"},
		{"empty command", map[string]any{"sandbox": "box", "command": ""}, "command is empty"},
		{"negative timeout", map[string]any{"sandbox": "box", "command": "true", "timeout": -2}, "timeout"},
		{"no command", map[string]any{"sandbox": "box"}, "command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				got := errorText(t, c.start(tc.args, stream).wait(t))
				if !strings.Contains(got, tc.want) {
					t.Errorf("stream=%v: tool error %q does not say %q", stream, got, tc.want)
				}
			}
		})
	}
	// Another user's sandbox is as good as unknown.
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["mcp"]}`)
	got := errorText(t, e.connect(t, ada, eras[0]).start(map[string]any{"sandbox": "box", "command": "true"}, true).wait(t))
	if !strings.Contains(got, "no such sandbox") {
		t.Errorf("someone else's sandbox: %q", got)
	}
}

func TestExecBoundTokenMayOmitSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, e.admin, "box", "")
	e.sandbox(t, e.admin, "other", "")
	_, bound := e.newToken(t, `{"scopes": ["mcp"], "sandbox": "box"}`) // the admin's, as box is
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, bound, era)
			for _, stream := range []bool{false, true} {
				out := structured(t, c.start(map[string]any{"command": "basename $PWD"}, stream).wait(t))
				if out["exit_code"] != 0.0 || out["stdout"] != "work\n" {
					t.Errorf("stream=%v: result = %v", stream, out)
				}
			}
			got := errorText(t, c.start(map[string]any{"sandbox": "other", "command": "true"}, true).wait(t))
			if !strings.Contains(got, "no such sandbox") {
				t.Errorf("a bound token reached another sandbox: %q", got)
			}
		})
	}
}

// TestExecPerUserLimit: a streamed exec past HANGAR_STREAM_MAX_PER_USER, through another token
// of the same user, is a tool error naming the limit; a resource subscription too.
func TestExecPerUserLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxPerUser: 2, turns: true})
	_, m1 := e.newToken(t, `{"user": "mallory", "scopes": ["user", "mcp"]}`)
	_, m2 := e.newToken(t, `{"user": "mallory", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, m1, "m-box", "")
	long := map[string]any{"sandbox": "m-box", "command": "echo started; sleep 300"}
	c1 := e.connect(t, m1, eras[1])
	for i := 0; i < 2; i++ {
		k := c1.start(long, true)
		// Ended before the env's cleanup: else it waits for the call's timeout.
		defer func() { k.cancel(); <-k.done }()
		if p := c1.nextProgress(t, k); p.message != "started\n" {
			t.Fatalf("stream %d: progress %+v", i+1, p)
		}
	}
	c2 := e.connect(t, m2, eras[1])
	got := errorText(t, c2.start(long, true).wait(t))
	if !strings.Contains(got, "HANGAR_STREAM_MAX_PER_USER") || !strings.Contains(got, "mallory") {
		t.Errorf("the refusal does not name the limit and the user: %q", got)
	}
	e.session(t, m1, "watched", "m-box")
	for _, era := range eras {
		s := e.subscriber(t, m2, era, nil)
		if code, msg := s.refusal(t, e, m2, "hangar://sessions/watched/events"); code == 0 || !strings.Contains(msg, "HANGAR_STREAM_MAX_PER_USER") {
			t.Errorf("%s: a subscription past the user's limit: %d %q, want a refusal naming it", era, code, msg)
		}
	}
}

func TestExecPerTokenLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxPerToken: 2})
	_, ada := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	_, bob := e.newToken(t, `{"user": "bob", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "ada-box", "")
	e.sandbox(t, bob, "bob-box", "")
	long := func(box string) map[string]any {
		return map[string]any{"sandbox": box, "command": "echo started; sleep 300"}
	}
	c := e.connect(t, ada, eras[1])
	var calls []*call
	for i := 0; i < 2; i++ {
		k := c.start(long("ada-box"), true)
		calls = append(calls, k)
		if p := c.nextProgress(t, k); p.message != "started\n" {
			t.Fatalf("stream %d: progress %+v", i+1, p)
		}
	}
	got := errorText(t, c.start(long("ada-box"), true).wait(t))
	if !strings.Contains(got, "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("the refusal does not name the limit: %q", got)
	}
	// A plain exec is no stream: it still runs.
	if out := structured(t, c.start(map[string]any{"sandbox": "ada-box", "command": "echo plain"}, false).wait(t)); out["stdout"] != "plain\n" {
		t.Errorf("plain exec past the stream limit = %v", out)
	}
	// Another token still gets its stream.
	b := e.connect(t, bob, eras[0])
	bk := b.start(long("bob-box"), true)
	if p := b.nextProgress(t, bk); p.message != "started\n" {
		t.Fatalf("bob's stream: progress %+v", p)
	}
	for _, k := range append(calls, bk) {
		k.cancel()
		<-k.done
	}
}

func TestExecCancelKillsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			pidFile := filepath.Join(t.TempDir(), "pid")
			k := c.start(map[string]any{"sandbox": "box", "command": sleeper(pidFile)}, true)
			if p := c.nextProgress(t, k); p.message != "started\n" {
				t.Fatalf("progress %+v", p)
			}
			pid := pidOf(t, pidFile)
			defer syscall.Kill(pid, syscall.SIGKILL)
			k.cancel()
			<-k.done
			waitDead(t, pid)
			waitStreams(t, e, 0)
		})
	}
}

// waitStreams waits until n streams are open.
func waitStreams(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		total, _ := e.streams.Count("")
		if total == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, want %d", total, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecRevokedKillsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			id, tok := e.newToken(t, `{"user": "ada", "scopes": ["user", "mcp"]}`)
			box := "box-" + era[:4]
			e.sandbox(t, tok, box, "")
			c := e.connect(t, tok, era)
			pidFile := filepath.Join(t.TempDir(), "pid")
			k := c.start(map[string]any{"sandbox": box, "command": sleeper(pidFile)}, true)
			if p := c.nextProgress(t, k); p.message != "started\n" {
				t.Fatalf("progress %+v", p)
			}
			pid := pidOf(t, pidFile)
			defer syscall.Kill(pid, syscall.SIGKILL)
			if status, out := e.do(t, "DELETE", "/api/tokens/"+id, e.admin, ""); status != http.StatusNoContent {
				t.Fatalf("revoke = %d %v", status, out)
			}
			out := structured(t, k.wait(t))
			if out["closed"] != "revoked" || out["exit_code"] != nil || out["stdout"] != "started\n" {
				t.Errorf("result = %v, want closed: revoked, exit_code null, the output so far", out)
			}
			// The same words as REST's (issue 10 left MCP saying the client was gone).
			if out["status"] != "killed: the stream's token was revoked or expired" {
				t.Errorf("status = %v, want killed because the token was revoked", out["status"])
			}
			waitDead(t, pid)
		})
	}
}

func TestExecEndTokenKillsCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, e.admin, "box", "")
	id, tok := e.newToken(t, `{"user": "admin", "scopes": ["admin", "mcp"]}`)
	c := e.connect(t, tok, eras[1])
	pidFile := filepath.Join(t.TempDir(), "pid")
	k := c.start(map[string]any{"sandbox": "box", "command": sleeper(pidFile)}, true)
	if p := c.nextProgress(t, k); p.message != "started\n" {
		t.Fatalf("progress %+v", p)
	}
	pid := pidOf(t, pidFile)
	defer syscall.Kill(pid, syscall.SIGKILL)
	e.streams.EndToken(id)
	if out := structured(t, k.wait(t)); out["closed"] != "revoked" {
		t.Errorf("result = %v, want closed: revoked", out)
	}
	waitDead(t, pid)
}

func TestExecShutdownLeavesCommandRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[0])
	pidFile := filepath.Join(t.TempDir(), "pid")
	k := c.start(map[string]any{"sandbox": "box", "command": sleeper(pidFile)}, true)
	if p := c.nextProgress(t, k); p.message != "started\n" {
		t.Fatalf("progress %+v", p)
	}
	pid := pidOf(t, pidFile)
	defer syscall.Kill(pid, syscall.SIGKILL)
	e.streams.Shutdown()
	out := structured(t, k.wait(t))
	if out["closed"] != "shutdown" || out["exit_code"] != nil || out["stdout"] != "started\n" {
		t.Errorf("result = %v, want closed: shutdown, exit_code null, the output so far", out)
	}
	if !alive(pid) {
		t.Error("the command was killed by the shutdown")
	}
	got := errorText(t, c.start(map[string]any{"sandbox": "box", "command": "true"}, true).wait(t))
	if !strings.Contains(got, "shutting down") {
		t.Errorf("a stream during shutdown: %q", got)
	}
	// The handler's Shutdown ends the sessions: the 2025-era client sees its session end.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := e.mcp.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- c.session.Wait() }()
	select {
	case <-waited:
	case <-ctx.Done():
		t.Error("the client's session did not end after Shutdown")
	}
}

// A 2025-era session's plain exec that is under way when the server shuts down runs to its end
// and is answered before the session closes: closing it first answered the call with an empty
// stream (the replicas chaos test saw it as a replica rolled).
func TestShutdownAnswersPlainExecInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[0])
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	gate, release := providertest.Gate(t)
	k := c.start(map[string]any{"sandbox": "box", "command": "echo $$ > " + pidFile + "; read _ < " + gate + "; echo finished"}, false)
	pidOf(t, pidFile) // the command runs: the call is in flight
	e.streams.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- e.mcp.Shutdown(ctx) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a call was in flight", err)
	case <-k.done:
		t.Fatalf("the call was answered before its command ended: %+v %v", k.res, k.err)
	case <-time.After(100 * time.Millisecond): // nothing may happen: a bounded look, not a wait for an event
	}
	release()
	if out := structured(t, k.wait(t)); out["stdout"] != "finished\n" || out["exit_code"] != float64(0) {
		t.Errorf("result = %v, want the command's whole output and exit code 0", out)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestExecDestroyedSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[1])
	k := c.start(map[string]any{"sandbox": "box", "command": "echo started; sleep 300"}, true)
	if p := c.nextProgress(t, k); p.message != "started\n" {
		t.Fatalf("progress %+v", p)
	}
	if status, out := e.do(t, "DELETE", "/api/sandboxes/box", staticSecret, ""); status != http.StatusNoContent {
		t.Fatalf("delete = %d %v", status, out)
	}
	if out := structured(t, k.wait(t)); out["closed"] != "destroyed" {
		t.Errorf("result = %v, want closed: destroyed", out)
	}
}

// TestMCPNeedsTheMCPScope: no token or a bad one is a 401 and a token without the mcp scope a
// 403, each with the WWW-Authenticate challenge RFC 6750 gives it (the scope needed, and the
// error when a token was sent).
func TestMCPNeedsTheMCPScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	_, userOnly := e.newToken(t, `{"user": "ada", "scopes": ["user"]}`)
	for _, c := range []struct {
		name, tok string
		status    int
		challenge string
	}{
		{"no mcp scope", userOnly, http.StatusForbidden, `Bearer error="insufficient_scope", scope="mcp"`},
		{"no token", "", http.StatusUnauthorized, `Bearer scope="mcp"`},
		{"unknown token", "hgr_nope", http.StatusUnauthorized, `Bearer error="invalid_token", scope="mcp"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.tok != "" {
				req.Header.Set("Authorization", "Bearer "+c.tok)
			}
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("WWW-Authenticate") != c.challenge {
				t.Errorf("status %d, WWW-Authenticate %q; want %d, %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.status, c.challenge)
			}
		})
	}
}

// TestKeepAliveAndHeaders reads a streamed call's response as raw SSE: X-Accel-Buffering is
// set, and a quiet command's stream opens at once and gets keep-alive comments.
func TestKeepAliveAndHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{keepAlive: 50 * time.Millisecond})
	e.sandbox(t, staticSecret, "box", "")
	gate, goOn := providertest.Gate(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec",` +
		`"arguments":{"sandbox":"box","command":"read _ < ` + gate + `; echo done","stream":true},` +
		`"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Authorization": "Bearer " + staticSecret, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "exec",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	r := bufio.NewReader(resp.Body)
	var keepAlives int
	var sawProgress, sawResult bool
	for !sawResult {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE: %v (keep-alives %d, progress %v)", err, keepAlives, sawProgress)
		}
		switch {
		case line == ": keep-alive\n":
			if sawProgress {
				continue
			}
			if keepAlives++; keepAlives == 2 {
				// Two comments before any output: the command may go on now.
				goOn()
			}
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"notifications/progress"`):
			if keepAlives < 2 {
				t.Fatalf("output before the command was let go: %s", line)
			}
			sawProgress = strings.Contains(line, `"message":"done\n"`)
		case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"result"`):
			sawResult = true
			if !sawProgress || !strings.Contains(line, `"exit_code":0`) {
				t.Errorf("result %s (progress seen: %v)", line, sawProgress)
			}
		case line == "\n", line == ": ok\n", strings.HasPrefix(line, "event: "), strings.HasPrefix(line, "id: "):
		default:
			t.Errorf("not an SSE line: %q", line)
		}
	}
}

func TestExecByteCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{maxBytes: 1000})
	e.sandbox(t, staticSecret, "box", "")
	c := e.connect(t, staticSecret, eras[1])
	k := c.start(map[string]any{"sandbox": "box", "command": "for i in $(seq 40); do echo line-$i-padding-padding-padding-padding-padding-padding-padding-padding-padding; done; echo THE-END"}, true)
	res := k.wait(t)
	// Notifications are handled apart from the result: read them until the cap's notice.
	var streamed, notices int
	var last float64
	for notices == 0 {
		var p progress
		select {
		case p = <-c.progress:
		case <-time.After(callTimeout):
			t.Fatalf("no notice of the cap after %d bytes", streamed)
		}
		if p.value <= last {
			t.Errorf("progress went from %v to %v", last, p.value)
		}
		last = p.value
		if strings.Contains(p.message, "HANGAR_STREAM_MAX_BYTES") {
			notices++
			continue
		}
		streamed += len(p.message)
	}
	for len(c.progress) > 0 {
		t.Errorf("progress after the cap's notice: %+v", <-c.progress)
	}
	if streamed == 0 || streamed > 1000 || notices != 1 {
		t.Errorf("streamed %d bytes with a cap of 1000, %d notices", streamed, notices)
	}
	out := structured(t, res)
	if out["capped"] != true || out["exit_code"] != 0.0 {
		t.Errorf("result = %v, want capped", out)
	}
	if stdout, _ := out["stdout"].(string); !strings.HasSuffix(stdout, "THE-END\n") {
		t.Errorf("the result lacks the end of the output: %q", stdout)
	}
}
