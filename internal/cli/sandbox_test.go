package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxLifecycle: create, ls, pause, resume and rm, in tables and as JSON; a refusal is
// hangar's sentence on one line of stderr.
func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	env := s.env(t)
	var sb map[string]any
	r := hangar(t, env, "", "sandbox", "create", "life-box", "--env", "GREETING=hello", "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb["name"] != "life-box" || sb["state"] != "running" {
		t.Fatalf("create -o json = %q (%v), want the running sandbox as JSON", r.stdout, err)
	}
	t.Cleanup(func() { hangar(t, env, "", "sandbox", "rm", "life-box") })
	if r.stderr != "" {
		t.Errorf("create into a pipe wrote to stderr (a spinner?): %q", r.stderr)
	}
	r = hangar(t, env, "", "sandbox", "create", "life-box").want(t, 1)
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(r.stderr, "taken") {
		t.Errorf("a taken name's error = %q, want hangar's sentence on one line", r.stderr)
	}
	hangar(t, env, "", "exec", "life-box", "--", "test \"$GREETING\" = hello").want(t, 0)

	var list struct {
		Sandboxes []map[string]any `json:"sandboxes"`
	}
	r = hangar(t, env, "", "sandbox", "ls", "-o", "json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("ls -o json is not JSON: %v: %q", err, r.stdout)
	}
	found := false
	for _, sb := range list.Sandboxes {
		found = found || sb["name"] == "life-box"
	}
	if !found {
		t.Errorf("ls -o json lacks life-box: %q", r.stdout)
	}
	if r := hangar(t, env, "", "sandbox", "pause", "life-box").want(t, 0); !strings.Contains(r.stdout, "paused") {
		t.Errorf("pause = %q", r.stdout)
	}
	if r := hangar(t, env, "", "exec", "life-box", "--", "true").want(t, 1); !strings.Contains(r.stderr, "life-box is paused; resume it first") {
		t.Errorf("exec in a paused sandbox: %q, want hangar's sentence", r.stderr)
	}
	if r := hangar(t, env, "", "sandbox", "resume", "life-box").want(t, 0); !strings.Contains(r.stdout, "running") {
		t.Errorf("resume = %q", r.stdout)
	}
	hangar(t, env, "", "sandbox", "rm", "life-box").want(t, 0)
	if r := hangar(t, env, "", "sandbox", "ls").want(t, 0); strings.Contains(r.stdout, "life-box") {
		t.Errorf("ls after rm still shows it: %q", r.stdout)
	}
}

// TestErrorsSayWhatToDo: hangar not running, no token, a bad token, a mistyped command line.
func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	cfg := t.TempDir()
	base := []string{"XDG_CONFIG_HOME=" + cfg, "HOME=" + cfg}
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"not running", []string{"HANGAR_URL=http://127.0.0.1:1", "HANGAR_TOKEN=x"}, []string{"sandbox", "ls"}, 1,
			"hangar: cannot reach hangar at http://127.0.0.1:1: is it running? (set HANGAR_URL)\n"},
		{"no token", []string{"HANGAR_URL=" + s.url}, []string{"sandbox", "ls"}, 1,
			"hangar: no token: run hangar login (or set HANGAR_TOKEN)\n"},
		{"bad token", []string{"HANGAR_URL=" + s.url, "HANGAR_TOKEN=hgr_nope"}, []string{"sandbox", "ls"}, 1,
			"Run hangar login with a valid token (or set HANGAR_TOKEN).\n"},
		{"bad output", []string{"HANGAR_URL=" + s.url, "HANGAR_TOKEN=x"}, []string{"sandbox", "ls", "-o", "yaml"}, 2,
			"--output must be table or json"},
		{"unknown verb", nil, []string{"sandboxes", "make"}, 2, "unknown command"},
		{"exec without a command", nil, []string{"exec", "box"}, 2, "takes a sandbox's name and a command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hangar(t, append(base, c.env...), "", c.args...).want(t, c.code)
			if !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("stderr %q, want %q (and stdout %q empty)", r.stderr, c.want, r.stdout)
			}
		})
	}
}

// TestLogin: login checks the token, writes URL and token to a 0600 file that later verbs
// read; HANGAR_URL and HANGAR_TOKEN override it; a refused token writes nothing.
func TestLogin(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	cfg := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + cfg, "HOME=" + t.TempDir()}
	path := filepath.Join(cfg, "hangar", "config.json")
	r := hangar(t, env, "hgr_wrong\n", "login", s.url).want(t, 1)
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a refused login wrote %s", path)
	}
	if !strings.Contains(r.stderr, "hangar login") {
		t.Errorf("a refused login says %q", r.stderr)
	}
	r = hangar(t, env, s.admin+"\n", "login", s.url).want(t, 0)
	if !strings.Contains(r.stdout, "as admin") || strings.Contains(r.stdout, s.admin) {
		t.Errorf("login printed %q, want who, and never the token", r.stdout)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v %v, want mode 0600", path, fi, err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), s.url) || !strings.Contains(string(b), s.admin) {
		t.Errorf("config file = %s", b)
	}
	if r := hangar(t, env, "", "whoami").want(t, 0); !strings.Contains(r.stdout, "You are admin") {
		t.Errorf("whoami after login = %q", r.stdout)
	}
	if r := hangar(t, env, "", "metrics").want(t, 0); !strings.HasPrefix(r.stdout, "hangar_") {
		t.Errorf("metrics = %q", r.stdout)
	}
	hangar(t, append(env, "HANGAR_TOKEN=hgr_nope"), "", "sandbox", "ls").want(t, 1)
	hangar(t, append(env, "HANGAR_URL=http://127.0.0.1:1"), "", "sandbox", "ls").want(t, 1)
}
