package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// memoryProbe is a script run in a container: it finds the daemon (hangar-envd envd) and starts
// a turn's harness (its agent a sleep), then, as root and as uid 65534, tries to read each one's
// environ and to open its mem (the way a token was read out of the daemon), printing one line
// per try: "<who> <process> <file> read" or "... refused"; then it checks that what those
// processes exec is dumpable as before (root reads the harness's agent's environ and that of a
// child of its own shell), and prints each process's command line. The agent is the harness's
// child once it runs sleep: before its exec it is a copy of the harness, not dumpable.
const memoryProbe = `set -u
d=
for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in */hangar-envd\ envd\ *) d=${p#/proc/};; esac
done
mkdir -p /tmp/probe
h=$(/opt/hangar/bin/hangar-envd harness --detach --run-log /tmp/probe/run.log --status-file /tmp/probe/status.json -- sleep 600)
h=${h%% *}
kid() { for s in /proc/[0-9]*/stat; do read -r x c st pp r < $s 2>/dev/null || continue; [ "$pp" = "$1" ] && [ "$c" = "($2)" ] && echo $x && return 0; done; return 1; }
until a=$(kid $h sleep); do sleep 0.01; done
try() { # who pid name
  for f in environ mem; do
    if [ $1 = root ]; then sh -c "exec 3< /proc/$2/$f" 2>/dev/null && r=read || r=refused
    else setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "exec 3< /proc/$2/$f" 2>/dev/null && r=read || r=refused; fi
    echo "$1 $3 $f $r"
  done
}
for who in root nobody; do try $who $d daemon; try $who $h harness; done
cat /proc/$a/environ > /dev/null && echo "root agent environ read"
sleep 600 & c=$!
cat /proc/$c/environ > /dev/null && echo "root child environ read"
kill $c $a
echo "daemon cmdline $(tr '\0' ' ' < /proc/$d/cmdline)"
echo "harness cmdline $(tr '\0' ' ' < /proc/$h/cmdline)"
echo end
`

// TestDaemonNotDumpable: inside a container (Docker's default profile: root without
// CAP_SYS_PTRACE), neither root nor another uid can read the daemon's or a turn harness's memory
// or environment — a token was read out of /proc/<daemon>/mem so — while the programs they run
// are as readable as any: the daemon and the harness are not dumpable, what they exec is. No
// process's command line holds the token.
func TestDaemonNotDumpable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p := newProvider(t, providertest.UniqueName("test"), nil)
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("dump"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer p.Destroy(ctx, sb)
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: memoryProbe})
	out := string(res.Stdout)
	if err != nil || !strings.HasSuffix(out, "end\n") {
		t.Fatalf("probe: %v, exit %d\n%s\n%s", err, res.ExitCode, out, res.Stderr)
	}
	lines := strings.Split(out, "\n")
	for _, who := range []string{"root", "nobody"} {
		for _, proc := range []string{"daemon", "harness"} {
			for _, f := range []string{"environ", "mem"} {
				try := who + " " + proc + " " + f
				switch {
				case slices.Contains(lines, try+" refused"):
				case slices.Contains(lines, try+" read"):
					t.Errorf("%s can open the %s's /proc/<pid>/%s", who, proc, f)
				default:
					t.Errorf("no outcome for %q in\n%s", try, out)
				}
			}
		}
	}
	for _, want := range []string{"root agent environ read", "root child environ read"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the probe did not print %q: what the daemon and the harness exec must stay dumpable\n%s", want, out)
		}
	}
	if strings.Contains(out, sb.Daemon.AccessToken) {
		t.Errorf("the daemon's token is on a command line:\n%s", out)
	}

	// A command the daemon starts is dumpable: root reads its environment.
	c, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Start(ctx, envd.StartRequest{Cmd: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	defer c.Signal(ctx, envd.ByPID(ps.PID()), envd.SIGKILL)
	res, err = p.Exec(ctx, sb, provider.ExecRequest{Command: fmt.Sprintf("cat /proc/%d/environ >/dev/null && echo read", ps.PID())})
	if err != nil || string(res.Stdout) != "read\n" {
		t.Errorf("root reading the environment of a command the daemon started: %q %q, %v; want it read (dumpable)", res.Stdout, res.Stderr, err)
	}
}
