package hostile_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// Named timeouts of the suite. They bound the test's own waiting; no attack is judged by time.
const (
	// startTimeout bounds hangar's start and a sandbox's creation (a pod on a busy machine
	// takes tens of seconds).
	startTimeout = 2 * time.Minute
	// stepTimeout bounds one exec or one turn: the longest attack (reading the daemon's
	// memory, a fork bomb's cleanup) takes a few seconds.
	stepTimeout = 90 * time.Second
	// sweepTimeout bounds the wait for what a turn left to be gone after the turn ended.
	sweepTimeout = 15 * time.Second
	// tick is how often the suite looks at what it is waiting for.
	tick = 100 * time.Millisecond
)

// The users an attack runs as: the sandbox's own (what an exec or a plain session's agent
// runs as: root in the Docker test image, hangar's user on local) and a split session's agent.
const (
	asUser  = "sandbox user"
	asSplit = "split agent"
)

// splitUID is the uid the split session's agent runs as: nobody, as in the issue.
const splitUID = 65534

// column is one provider's setup: how hangar serves it and what a sandbox asks for.
type column struct {
	name     string // the page's column and testdata file: the provider's name, or more
	provider string
	args     []string       // hangar serve's flags
	spec     map[string]any // added to the sandbox's request
	tmp      string         // a folder of the sandbox any uid may write ("": /tmp)
	// shim puts a bash (sh under that name) first in the sessions' PATH, for an image without
	// one: a turn's "command" agent runs bash.
	shim bool
}

// run is one provider's run of the suite: a hangar, a sandbox in it, a plain and a split
// session.
type run struct {
	t        *testing.T
	ctx      context.Context // ends when the test does
	col      column
	serve    *providertest.Serve
	token    string // the admin token
	sandbox  string
	marker   string // in the names of the run's files and processes
	work     string // a folder in the sandbox's /tmp that both users may write (mode 1777)
	daemon   int    // the sandbox's daemon's pid, as the sandbox sees it
	split    bool   // the split session exists
	splitWhy string // why not, when it does not
	client   *http.Client

	got          map[string]outcome // by attack/user
	last         time.Time          // when the last outcome was recorded
	impostorProc map[string]string  // the process whose tag each impostor took, by who started it
}

// newRun starts hangar for col, makes a sandbox and the two sessions, and finds the daemon's
// pid from inside the sandbox (any command there can: it is an ancestor of every exec).
func newRun(t *testing.T, col column) *run {
	if col.name == "" {
		col.name = col.provider
	}
	r := &run{t: t, col: col, marker: "hostile" + providertest.RandHex(5), client: &http.Client{},
		impostorProc: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.ctx = ctx
	dir, err := os.MkdirTemp("", "hangar-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	srv, err := providertest.NewServe(hangarBin, data, append([]string{"--default-provider", col.provider, "--session-poll-seconds", "1"}, col.args...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.serve = srv
	t.Cleanup(func() {
		srv.Stop()
		if t.Failed() {
			t.Logf("hangar's log:\n%s", providertest.LastLines(srv.Logs.String(), 80))
		}
	})
	r.start()
	if r.token, err = srv.AdminToken(); err != nil {
		t.Fatal(err)
	}
	r.sandbox = "hostile-" + col.name + "-" + providertest.RandHex(3)
	spec := map[string]any{"name": r.sandbox}
	for k, v := range col.spec {
		spec[k] = v
	}
	r.must("POST", "/api/sandboxes", spec)
	t.Cleanup(func() {
		if !r.serve.Running() {
			r.start()
		}
		r.call(context.Background(), "DELETE", "/api/sandboxes/"+r.sandbox, nil)
	})
	out, _ := r.exec(`p=$$
while [ "${p:-0}" -gt 0 ]; do
  [ "$(tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | sed -n 2p)" = envd ] && { echo $p; exit 0; }
  p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status)
done
exit 1`)
	if r.daemon, err = strconv.Atoi(strings.TrimSpace(out)); err != nil {
		t.Fatalf("find the daemon's pid from inside the sandbox: %q", out)
	}
	if col.tmp == "" {
		col.tmp = "/tmp"
	}
	r.work = col.tmp + "/" + r.marker
	if _, code := r.exec("mkdir -p " + r.work + " && chmod 1777 " + r.work); code != 0 {
		t.Fatalf("make %s in the sandbox: exit code %d", r.work, code)
	}
	t.Cleanup(func() {
		if r.serve.Running() {
			r.exec("rm -rf " + r.work)
		}
	})
	env := map[string]string{}
	if col.shim {
		r.exec(fmt.Sprintf("mkdir -p %s/bin && printf '#!/bin/sh\\nexec /bin/sh \"$@\"\\n' > %[1]s/bin/bash && chmod 755 %[1]s/bin %[1]s/bin/bash", r.work))
		env["PATH"] = r.work + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	r.must("POST", "/api/sessions", map[string]any{"name": "plain", "sandbox": r.sandbox, "agent": "command", "env": env})
	status, raw := r.call(ctx, "POST", "/api/sessions", map[string]any{"name": "split", "sandbox": r.sandbox, "agent": "command",
		"split": true, "split_uid": splitUID, "env": env})
	r.split = status == http.StatusCreated
	if !r.split {
		r.splitWhy = fmt.Sprintf("%d %s", status, raw)
		t.Logf("no split session in this sandbox: %s", r.splitWhy)
	}
	return r
}

// start starts hangar (again) and waits for its /readyz.
func (r *run) start() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := r.serve.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// exec runs script in the sandbox as the sandbox's user and returns its stdout and exit code.
func (r *run) exec(script string) (string, int) {
	r.t.Helper()
	res := r.must("POST", "/api/sandboxes/"+r.sandbox+"/exec", map[string]any{"command": script, "timeout": stepTimeout.Seconds()})
	code, _ := res["exit_code"].(float64)
	return providertest.Str(res["stdout"]), int(code)
}

// as runs script (sh) as who and returns what it printed (stdout and stderr). As the split
// agent it is a turn of the split session, whose output goes to a file of the run's folder
// that the sandbox's user then reads.
func (r *run) as(who, script string) string {
	r.t.Helper()
	if who == asUser {
		out, _ := r.exec("{\n" + script + "\n} 2>&1")
		return out
	}
	name := r.work + "/" + providertest.RandHex(4)
	r.writeFile(name+".sh", script)
	r.turn("split", fmt.Sprintf("sh %s.sh > %[1]s.out 2>&1", name))
	out, _ := r.exec(fmt.Sprintf("cat %s.out; rm -f %[1]s.out %[1]s.sh", name))
	return out
}

// batch runs scripts as who, each in a shell of its own, in one go (as the split agent, one
// turn), and returns what each printed.
func (r *run) batch(who string, scripts ...string) []string {
	r.t.Helper()
	sep := "@@" + r.marker + "-part"
	var b strings.Builder
	for _, s := range scripts {
		fmt.Fprintf(&b, "echo %s; sh -c %s 2>&1\n", sep, shellQuote(s))
	}
	parts := strings.Split(r.as(who, b.String()), sep+"\n")
	if len(parts) != len(scripts)+1 {
		r.t.Fatalf("a batch of %d scripts as the %s printed %d parts:\n%s", len(scripts), who, len(parts)-1, strings.Join(parts, "\n--\n"))
	}
	return parts[1:]
}

// writeFile writes content to path in the sandbox, readable by all.
func (r *run) writeFile(path, content string) {
	r.t.Helper()
	if _, code := r.exec(fmt.Sprintf("printf %%s %s | base64 -d > %s && chmod 644 %[2]s",
		shellQuote(base64Std(content)), path)); code != 0 {
		r.t.Fatalf("write %s in the sandbox: exit code %d", path, code)
	}
}

// turnJSON is what the suite reads of a turn.
type turnJSON struct {
	ID       string          `json:"id"`
	State    string          `json:"state"`
	ExitCode *int            `json:"exit_code"`
	Summary  json.RawMessage `json:"summary"`
}

// ended says whether a turn's state is final.
func (tu turnJSON) ended() bool {
	switch tu.State {
	case "done", "failed", "cancelled", "lost":
		return true
	}
	return false
}

// startTurn starts a turn of session with prompt and returns its id.
func (r *run) startTurn(session, prompt string) string {
	r.t.Helper()
	return providertest.Str(r.must("POST", "/api/sessions/"+session+"/turns", map[string]any{"prompt": prompt})["id"])
}

// getTurn reads a turn.
func (r *run) getTurn(session, id string) turnJSON {
	r.t.Helper()
	var tu turnJSON
	raw, _ := json.Marshal(r.must("GET", "/api/sessions/"+session+"/turns/"+id, nil))
	json.Unmarshal(raw, &tu)
	return tu
}

// waitTurn waits for a turn to end and returns it.
func (r *run) waitTurn(session, id string) turnJSON {
	r.t.Helper()
	var tu turnJSON
	waitFor(r.t, stepTimeout, "turn "+id+" of session "+session+" to end", func() bool {
		tu = r.getTurn(session, id)
		return tu.ended()
	})
	return tu
}

// turn runs a turn of session to its end.
func (r *run) turn(session, prompt string) turnJSON {
	r.t.Helper()
	return r.waitTurn(session, r.startTurn(session, prompt))
}

// events returns the data of a session's events of turn id, in order.
func (r *run) events(session, id string) []string {
	r.t.Helper()
	var out []string
	since := "0"
	for {
		res := r.must("GET", "/api/sessions/"+session+"/events?limit=1000&since="+since, nil)
		evs, _ := res["events"].([]any)
		for _, e := range evs {
			if m, _ := e.(map[string]any); m != nil && providertest.Str(m["turn"]) == id {
				out = append(out, providertest.Str(m["data"]))
			}
		}
		next := providertest.Str(res["next"])
		if len(evs) == 0 || next == since {
			return out
		}
		since = next
	}
}

// must sends a JSON request with the admin token and fails the test unless hangar answers 2xx;
// it returns the answer's JSON object.
func (r *run) must(method, path string, body any) map[string]any {
	r.t.Helper()
	status, raw := r.call(r.ctx, method, path, body)
	if status/100 != 2 {
		r.t.Fatalf("%s %s = %d %s", method, path, status, raw)
	}
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}

// call sends a JSON request (body nil: none) with the admin token and returns the status and
// body; 0 when hangar could not be reached.
func (r *run) call(ctx context.Context, method, path string, body any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, r.serve.URL+path, rd)
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

// shellQuote makes a single-quoted shell word.
func shellQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// waitFor and poll look every tick.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	providertest.WaitFor(t, d, tick, what, cond)
}

func poll(d time.Duration, cond func() bool) bool { return providertest.Poll(d, tick, cond) }
