package rest_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/store"
)

// dockerEngineUp reports whether a Docker engine answers here.
func dockerEngineUp() bool {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx)
	return err == nil
}

// needDocker skips loudly without an engine, except in CI, where one is always started.
func needDocker(t *testing.T) {
	if dockerEngineUp() {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Docker engine answers, and CI always starts one")
	}
	t.Skip("SKIPPING: no Docker engine answers here; start dockerd to run the Docker sandbox tests")
}

func (e *env) exec(t *testing.T, tok, name, body string) response {
	t.Helper()
	return e.do(t, "POST", "/api/sandboxes/"+name+"/exec", tok, body)
}

func TestSandboxesTwoUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user"]}`)

	r := e.do(t, "POST", "/api/sandboxes", ada, `{"name": "ada-box", "env": {"GREETING": "hello"}}`)
	if r.status != http.StatusCreated || r.body["state"] != "running" || r.body["owner"] != "ada" || r.body["daemon"] != true {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	if strings.Contains(r.raw, "access_token") || strings.Contains(r.raw, "127.0.0.1") {
		t.Errorf("the sandbox JSON shows how to reach its daemon: %s", r.raw)
	}
	if r := e.do(t, "POST", "/api/sandboxes", bob, `{"name": "bob-box", "daemon": false}`); r.status != http.StatusCreated {
		t.Fatalf("create bob-box = %d %s", r.status, r.raw)
	}

	// Neither sees the other's sandbox, in any way; both answers are 404, so names don't leak.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/sandboxes/ada-box", ""},
		{"DELETE", "/api/sandboxes/ada-box", ""},
		{"POST", "/api/sandboxes/ada-box/pause", ""},
		{"POST", "/api/sandboxes/ada-box/exec", `{"command": "true"}`},
	} {
		wantError(t, e.do(t, c.method, c.path, bob, c.body), http.StatusNotFound, "not_found")
	}
	names := func(tok, query string) string {
		r := e.do(t, "GET", "/api/sandboxes"+query, tok, "")
		var out []string
		for _, sb := range r.body["sandboxes"].([]any) {
			out = append(out, sb.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	if got := names(ada, ""); got != "ada-box" {
		t.Errorf("ada lists %q", got)
	}
	if got := names(bob, ""); got != "bob-box" {
		t.Errorf("bob lists %q", got)
	}
	if got := names(e.admin, ""); got != "ada-box,bob-box" {
		t.Errorf("admin lists %q", got)
	}

	// A token bound to ada-box sees only it and makes nothing.
	_, agent := e.newToken(t, ada, `{"scopes": ["user"], "sandbox": "ada-box"}`)
	if got := names(agent, ""); got != "ada-box" {
		t.Errorf("the bound token lists %q", got)
	}
	wantError(t, e.do(t, "POST", "/api/sandboxes", agent, `{"name": "more"}`), http.StatusForbidden, "forbidden")
	if r := e.exec(t, agent, "ada-box", `{"command": "echo $GREETING"}`); r.status != 200 || r.body["stdout"] != "hello\n" {
		t.Errorf("exec with the bound token = %d %s", r.status, r.raw)
	}
	// A jobs-only token has no business with sandboxes here.
	_, jobs := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	wantError(t, e.do(t, "GET", "/api/sandboxes", jobs, ""), http.StatusForbidden, "forbidden")
}

func TestSandboxBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "taken"}`); r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	for _, c := range []struct {
		name, body, code string
		status           int
		detail           string
	}{
		{"duplicate", `{"name": "taken"}`, "conflict", 409, "taken"},
		{"uppercase", `{"name": "Box"}`, "bad_request", 400, "Box"},
		{"too long", `{"name": "` + strings.Repeat("a", 64) + `"}`, "bad_request", 400, "63"},
		{"underscore", `{"name": "a_b"}`, "bad_request", 400, "a_b"},
		{"unknown provider", `{"name": "x", "provider": "lxc"}`, "bad_request", 400, "lxc"},
		{"unconfigured provider", `{"name": "x", "provider": "e2b"}`, "bad_request", 400, "HANGAR_E2B_API_KEY"},
		{"bad env", `{"name": "x", "env": {"A=B": "c"}}`, "bad_request", 400, "A=B"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, "POST", "/api/sandboxes", e.admin, c.body)
			wantError(t, r, c.status, c.code)
			if !strings.Contains(r.raw, c.detail) {
				t.Errorf("the error does not mention %q: %s", c.detail, r.raw)
			}
		})
	}
	wantError(t, e.exec(t, e.admin, "taken", `{"command": ""}`), 400, "bad_request")
	wantError(t, e.exec(t, e.admin, "taken", `{"command": "true", "timeout": -1}`), 400, "bad_request")
	r := e.exec(t, e.admin, "taken", `{"command": "true", "cwd": "/no/such/dir"}`)
	wantError(t, r, 400, "bad_request")
	// What hangar runs the command with (/bin/sh, bash) is not the caller's business.
	if detail := r.body["error"].(map[string]any)["detail"]; detail != `invalid sandbox request: the working directory "/no/such/dir" does not exist or is not a directory` {
		t.Errorf("detail = %v", detail)
	}
	wantError(t, e.exec(t, e.admin, "nope", `{"command": "true"}`), 404, "not_found")
}

// TestLocalWorkdirIsTheFolder: a local sandbox's workdir that names its folder itself is bad
// input (400, saying so), for a sandbox and a job's sandbox alike, and leaves no sandbox behind.
func TestLocalWorkdirIsTheFolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, jobs := e.newToken(t, e.admin, `{"user": "admin", "scopes": ["jobs"]}`)
	for i, workdir := range []string{"/", ".", "..", "/../..", "./"} {
		name := "wd-" + strconv.Itoa(i)
		spec := jsonBody(map[string]string{"name": name, "workdir": workdir})
		for _, c := range []struct{ path, tok, body string }{
			{"/api/sandboxes", e.admin, spec},
			{"/api/jobs", jobs, `{"prompt": "true", "agent": "command", "sandbox": ` + spec + `}`},
		} {
			r := e.do(t, "POST", c.path, c.tok, c.body)
			wantError(t, r, http.StatusBadRequest, "bad_request")
			if !strings.Contains(r.raw, "folder itself") {
				t.Errorf("POST %s with workdir %q: %s, want it to say the workdir is the sandbox's folder", c.path, workdir, r.raw)
			}
			if sb, err := e.store.GetSandbox(context.Background(), name); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("POST %s with workdir %q left a record: %+v %v", c.path, workdir, sb, err)
			}
		}
	}
	if r := e.do(t, "GET", "/api/sandboxes", e.admin, ""); strings.Contains(r.raw, "wd-") {
		t.Errorf("a refused sandbox is listed: %s", r.raw)
	}
	// A folder inside it is a workdir.
	e.sandbox(t, e.admin, "wd-ok", `, "workdir": "/src/../src"`)
}

func TestExecThroughDaemonAndFallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, daemon := range []bool{true, false} {
		name, via := "with-daemon", "daemon"
		if !daemon {
			name, via = "without-daemon", "provider"
		}
		t.Run(via, func(t *testing.T) {
			body := `{"name": "` + name + `", "daemon": ` + map[bool]string{true: "true", false: "false"}[daemon] + `}`
			if r := e.do(t, "POST", "/api/sandboxes", e.admin, body); r.status != http.StatusCreated {
				t.Fatalf("create = %d %s", r.status, r.raw)
			}
			r := e.exec(t, e.admin, name, `{"command": "echo hi; echo oops >&2; echo $X $0; exit 3", "env": {"X": "x"}}`)
			if r.status != 200 {
				t.Fatalf("exec = %d %s", r.status, r.raw)
			}
			if r.body["stdout"] != "hi\nx bash\n" || r.body["stderr"] != "oops\n" || r.body["exit_code"] != 3.0 ||
				r.body["via"] != via || r.body["streamed"] != false || r.body["timed_out"] != false {
				t.Errorf("exec = %s", r.raw)
			}
			// HOME is the sandbox's folder, through the daemon and without: a login shell
			// must not read the host user's profile.
			if r := e.exec(t, e.admin, name, `{"command": "echo $HOME"}`); r.body["stdout"] != filepath.Join(e.dir, "sandboxes", name)+"\n" {
				t.Errorf("HOME = %v, want the sandbox's folder", r.body["stdout"])
			}
			r = e.exec(t, e.admin, name, `{"command": "printf '\\377\\376ok'"}`)
			if r.body["stdout_encoding"] != "base64" {
				t.Fatalf("invalid UTF-8 came back as %s", r.raw)
			}
			if b, _ := base64.StdEncoding.DecodeString(r.body["stdout"].(string)); string(b) != "\xff\xfeok" {
				t.Errorf("stdout decodes to %q", b)
			}
			r = e.exec(t, e.admin, name, `{"command": "sleep 30", "timeout": 0.5}`)
			// One answer through the daemon and without (docs/sandboxes.md): -1, timed out.
			if r.status != 200 || r.body["timed_out"] != true || r.body["exit_code"] != -1.0 || r.body["status"] != "killed at the timeout" {
				t.Errorf("a command past its timeout = %d %s", r.status, r.raw)
			}
			r = e.exec(t, e.admin, name, `{"command": "head -c 300000 /dev/zero | tr '\\0' a; echo"}`)
			if out, _ := r.body["stdout"].(string); len(out) != 256<<10 || !strings.HasSuffix(out, "a\n") {
				t.Errorf("big output kept %d bytes, want the last 256 KiB", len(out))
			}
		})
	}
}

func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "life"}`); r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	if r := e.do(t, "POST", "/api/sandboxes/life/pause", e.admin, ""); r.status != 200 || r.body["state"] != "paused" {
		t.Fatalf("pause = %d %s", r.status, r.raw)
	}
	wantError(t, e.exec(t, e.admin, "life", `{"command": "true"}`), http.StatusConflict, "conflict")
	wantError(t, e.do(t, "POST", "/api/sandboxes/life/pause", e.admin, ""), http.StatusConflict, "conflict")
	if r := e.do(t, "POST", "/api/sandboxes/life/resume", e.admin, ""); r.status != 200 || r.body["state"] != "running" {
		t.Fatalf("resume = %d %s", r.status, r.raw)
	}
	if r := e.exec(t, e.admin, "life", `{"command": "echo back"}`); r.body["stdout"] != "back\n" {
		t.Fatalf("exec after resume = %s", r.raw)
	}
	if r := e.do(t, "DELETE", "/api/sandboxes/life", e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.raw)
	}
	wantError(t, e.exec(t, e.admin, "life", `{"command": "true"}`), http.StatusConflict, "conflict")
	if r := e.do(t, "GET", "/api/sandboxes/life", e.admin, ""); r.body["state"] != "destroyed" {
		t.Errorf("GET after delete = %s", r.raw)
	}
	if r := e.do(t, "GET", "/api/sandboxes", e.admin, ""); strings.Contains(r.raw, "life") {
		t.Errorf("a destroyed sandbox is listed: %s", r.raw)
	}
	if r := e.do(t, "GET", "/api/sandboxes?all=true", e.admin, ""); !strings.Contains(r.raw, "life") {
		t.Errorf("?all=true leaves out the destroyed sandbox: %s", r.raw)
	}
	if _, err := os.Stat(e.dir + "/sandboxes/life"); !os.IsNotExist(err) {
		t.Errorf("the local sandbox's folder is still there: %v", err)
	}
	// The name is free again.
	if r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "life"}`); r.status != http.StatusCreated {
		t.Fatalf("create again = %d %s", r.status, r.raw)
	}
	e.do(t, "DELETE", "/api/sandboxes/life", e.admin, "")
}

func TestDockerSandboxes(t *testing.T) {
	t.Parallel()
	needDocker(t)
	ctx := context.Background()
	cli := dockertest.Client(t)
	image, err := dockertest.EnsureImage(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	for _, c := range []struct{ name, daemon, via string }{{"dock-daemon", "true", "daemon"}, {"dock-exec", "false", "provider"}} {
		t.Run(c.via, func(t *testing.T) {
			r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "`+c.name+`", "provider": "docker", "image": "`+image+`", "daemon": `+c.daemon+`}`)
			if r.status != http.StatusCreated || r.body["state"] != "running" {
				t.Fatalf("create = %d %s", r.status, r.raw)
			}
			defer func() {
				if r := e.do(t, "DELETE", "/api/sandboxes/"+c.name, e.admin, ""); r.status != http.StatusNoContent {
					t.Errorf("delete = %d %s", r.status, r.raw)
				}
			}()
			r = e.exec(t, e.admin, c.name, `{"command": "echo hi; exit 4"}`)
			if r.body["stdout"] != "hi\n" || r.body["exit_code"] != 4.0 || r.body["via"] != c.via {
				t.Errorf("exec = %d %s", r.status, r.raw)
			}
		})
	}
	r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "no-image", "provider": "docker", "image": "hangar-test:never-built"}`)
	wantError(t, r, http.StatusBadRequest, "bad_request")
	if !strings.Contains(r.raw, "hangar-test:never-built") || !strings.Contains(r.raw, "docker pull") {
		t.Errorf("the missing-image error should name the image and how to get it: %s", r.raw)
	}
}

// TestMissingImageSaysWhich: a docker sandbox whose image the engine lacks is a 400 whose
// message names the image and how to get it, with "create sandbox" said once.
func TestMissingImageSaysWhich(t *testing.T) {
	t.Parallel()
	needDocker(t)
	e := newEnv(t)
	r := e.do(t, "POST", "/api/sandboxes", e.admin, `{"name": "dock", "provider": "docker", "image": "hangar-test-missing:nope"}`)
	wantError(t, r, http.StatusBadRequest, "bad_request")
	e2, _ := r.body["error"].(map[string]any)
	want := "Image hangar-test-missing:nope is not on the Docker engine; get it with `docker pull hangar-test-missing:nope` (or `docker load` it from a file)."
	if e2["message"] != want {
		t.Errorf("message = %q\nwant      %q", e2["message"], want)
	}
	if detail, _ := e2["detail"].(string); strings.Count(detail, "create sandbox") != 1 {
		t.Errorf("detail = %q, want 'create sandbox' once", detail)
	}
	// Nothing was made, so nothing stays listed, and the name is free.
	if r := e.do(t, "GET", "/api/sandboxes", e.admin, ""); strings.Contains(r.raw, `"dock"`) {
		t.Errorf("the refused sandbox is listed: %s", r.raw)
	}
}
