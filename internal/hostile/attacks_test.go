package hostile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// outcome is what one attack, run as one user on one provider, came to: what the run saw, in
// words for the page, and whether hangar or the provider contained it.
type outcome struct {
	Attack    string `json:"attack"`
	As        string `json:"as"`
	Saw       string `json:"saw"`
	Contained bool   `json:"contained"`
}

// An attack of the suite: its id (in testdata), what the page says it does, and who runs it.
type attack struct {
	id, doc string
	as      []string
}

// attacks are the suite's attacks, in the page's order.
var attacks = []attack{
	{"token-environ", "Read the daemon's access token from `/proc/<daemon>/environ`", []string{asUser, asSplit}},
	{"token-cmdline", "Read it from `/proc/<daemon>/cmdline`", []string{asUser, asSplit}},
	{"token-mem", "Read it from the daemon's memory (`/proc/<daemon>/maps`, then `mem`)", []string{asUser, asSplit}},
	{"forge-tag", "Kill hangar's background process and start an impostor under its tag, with a token found above; then hangar restarts", []string{asUser, asSplit}},
	{"adopt-impostor", "With the daemon's real token (a leak), while hangar is down: kill a background process and start an impostor under its tag; then hangar restarts", []string{asUser}},
	{"turn-swap", "Pre-create the plain sessions' turn folder and swap a plain session's turn directory for a forged run log and status file (a turn that prints 5 lines and exits 7)", []string{asSplit}},
	{"setsid-escape", "Leave processes behind a turn: one `setsid`, one orphaned by a double fork", []string{asUser, asSplit}},
	{"fork-bomb", "Exhaust processes: fork up to the pids limit plus 16, or 300 where none is below 4,096 (not where the sandbox is in hangar's own cgroup: a bomb on the machine)", []string{asUser, asSplit}},
	{"disk-fill", "Fill the disk: write up to 256 MiB in the sandbox (`/tmp`; on Kubernetes the workdir), removed at once", []string{asUser, asSplit}},
	{"reach-hangar", "Reach hangar's port at 127.0.0.1 from inside the sandbox (`/healthz`, then `/api/whoami` without a token)", []string{asUser, asSplit}},
}

// mustContain says whether attack run as who on provider must be contained: the test fails
// when it is not. Where it need not be, the page still says what the run saw.
func mustContain(provider, attack, who string) bool {
	switch attack {
	case "token-environ", "token-cmdline", "token-mem", "forge-tag":
		// local isolates nothing: a command runs as hangar's user, the daemon's.
		return provider != "local" || who != asUser
	case "fork-bomb":
		// Docker sandboxes get a pids limit; a pod's is the kubelet's (podPidsLimit), local's
		// the machine's.
		return provider == "docker"
	case "disk-fill":
		// No provider bounds a sandbox's disk synchronously (Docker's writable layer is the
		// engine's disk; a pod past its ephemeral-storage limit is evicted later).
		return false
	}
	return true
}

// fields splits the lines of out into words.
func fields(out string) [][]string {
	var lines [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			lines = append(lines, f)
		}
	}
	return lines
}

// tokenProbe is what one user read of the daemon: per source (environ, cmdline, mem), whether
// it could read it and the 64-hex strings in it (a token is 32 random bytes in hex).
type tokenProbe struct {
	read  map[string]bool
	cands map[string][]string
}

// tokenScript reads the daemon's environ, cmdline and the writable regions of its memory
// (the daemon's pid in D), and prints `read SOURCE` or `denied SOURCE`, then `cand SOURCE HEX`
// for the first and the last 64 digits of each run of 64 hex digits or more (a token is 32
// random bytes in hex; in memory it may lie against other hex digits). tr squeezes each run of
// other bytes into one newline: the daemon's memory is mostly zeros, which would otherwise make a
// line each for awk.
const tokenScript = `runs() { awk 'length($0) >= 64 { print substr($0, 1, 64); if (length($0) > 64) print substr($0, length($0) - 63) }' | sort -u; }
for s in environ cmdline; do
  if cat /proc/$D/$s > /dev/null 2>&1; then echo "read $s"; tr -cs '0-9a-f' '\n' < /proc/$D/$s | runs | sed "s/^/cand $s /"
  else echo "denied $s"; fi
done
if maps=$(cat /proc/$D/maps 2>/dev/null) && [ -n "$maps" ]; then
  rw=$(echo "$maps" | awk '$2 ~ /^rw/ {print $1}')
  first=$(echo "$rw" | head -1); first=${first%%-*}
  got=$(dd if=/proc/$D/mem bs=4096 skip=$((0x$first/4096)) count=1 2>/dev/null | wc -c)
  if [ "${got:-0}" -gt 0 ]; then
    echo "read mem"
    for range in $rw; do
      s=$((0x${range%%-*})); e=$((0x${range#*-}))
      [ $((e-s)) -gt 268435456 ] && continue
      dd if=/proc/$D/mem bs=4096 skip=$((s/4096)) count=$(((e-s)/4096)) 2>/dev/null
    done | tr -cs '0-9a-f' '\n' | runs | sed 's/^/cand mem /'
  else echo "denied mem"; fi
else echo "denied mem"; fi`

// tokenAttack is tokenScript for the sandbox's daemon.
func (r *run) tokenAttack() string { return fmt.Sprintf("D=%d\n", r.daemon) + tokenScript }

// probeToken reads what tokenAttack printed as who.
func (r *run) probeToken(who, out string) tokenProbe {
	p := tokenProbe{read: map[string]bool{}, cands: map[string][]string{}}
	for _, f := range fields(out) {
		switch {
		case f[0] == "read" && len(f) == 2:
			p.read[f[1]] = true
		case f[0] == "cand" && len(f) == 3:
			p.cands[f[1]] = append(p.cands[f[1]], f[2])
		}
	}
	if len(p.read) == 0 {
		r.t.Logf("%s's read of the daemon printed %q", who, providertest.LastLines(out, 20))
	}
	r.t.Logf("%s read of the daemon (pid %d): %v, %d candidates in environ, %d in cmdline, %d in mem", who, r.daemon, p.read,
		len(p.cands["environ"]), len(p.cands["cmdline"]), len(p.cands["mem"]))
	return p
}

// judgeToken is a token row's outcome: works says whether a candidate opens the daemon. The
// daemon's memory holds the token of each request it reads, but whether one snapshot of it
// still does depends on the garbage collector: memory that can be read at all is not contained
// (an attacker reads again), whatever this read found, so that the row says the same each run.
func judgeToken(p tokenProbe, source string, works func(string) bool) (saw string, contained bool, token string) {
	if !p.read[source] {
		return "unreadable", true, ""
	}
	for _, c := range p.cands[source] {
		if works(c) {
			token = c
			break
		}
	}
	switch {
	case source == "mem":
		return "readable: it holds the token of each request the daemon reads", false, token
	case token != "":
		return "token found: the daemon answered `Process/List` with it", false, token
	}
	return "read, no token in it", true, ""
}

// reachAttack tries hangar's port from inside the sandbox, at 127.0.0.1 only, with busybox's
// wget (every test image is busybox, and CI installs busybox-static on the machine the local
// column runs on), or a wget of the PATH; it prints `no wget` when there is neither.
func (r *run) reachAttack() string {
	port := r.serve.Addr[strings.LastIndex(r.serve.Addr, ":")+1:]
	return fmt.Sprintf(`if busybox wget --help > /dev/null 2>&1; then w="busybox wget"
elif command -v wget > /dev/null 2>&1; then w=wget
else echo "no wget"; exit 0; fi
if $w -q -O /dev/null http://127.0.0.1:%[1]s/healthz 2>/dev/null; then echo "healthz ok"; else echo "healthz no"; fi
$w -S -O /dev/null http://127.0.0.1:%[1]s/api/whoami 2>&1 | grep -o 'HTTP/1.[01] [0-9]*' | head -1`, port)
}

// noWget is reach-hangar's outcome where the sandbox has no wget: the attack did not run, which
// is no containment.
const noWget = "not run: no wget in the sandbox (busybox's or another)"

// judgeReach is what reachAttack's output says; an error when the attack could not run.
func judgeReach(out string) (string, bool, error) {
	switch {
	case strings.Contains(out, "no wget"):
		return noWget, false, errors.New("the sandbox has neither busybox (its wget) nor a wget in its PATH, so hangar's port was not tried (on local, the machine's PATH: install busybox-static, as .ci/run does)")
	case strings.Contains(out, "healthz no") && !strings.Contains(out, "HTTP/"):
		return "refused: 127.0.0.1 is the sandbox's own", true, nil
	case strings.Contains(out, "HTTP/1.1 401") || strings.Contains(out, "HTTP/1.0 401"):
		return "reached: `/api` answers 401 without a token", true, nil
	}
	return "reached: " + strings.Join(strings.Fields(out), " "), false, nil
}

// setsidPrompt leaves two processes behind a turn, each with mark in its command line.
const setsidPrompt = `setsid sh -c 'while :; do sleep 1; done' %[1]s-setsid </dev/null >/dev/null 2>&1 &
( sh -c 'while :; do sleep 1; done' %[1]s-orphan </dev/null >/dev/null 2>&1 & )
sleep 0.2; echo left; exit 0`

// survivors is a script that prints the pid of each process with mark in its command line:
// one grep over every command line (a process per process on a machine of hundreds is seconds
// of CPU, and escape runs it every tick). Its pattern matches the mark without holding it (a
// bracket around one of its characters), so that neither grep nor the shell running the script
// matches.
func survivors(mark string) string {
	h := len(mark) / 2
	return fmt.Sprintf(`for f in $(grep -lz -e '%s[%s]%s' /proc/[0-9]*/cmdline 2>/dev/null); do f=${f#/proc/}; echo "${f%%/cmdline}"; done`,
		mark[:h], mark[h:h+1], mark[h+1:])
}

// escape runs a turn that leaves processes behind and waits for them to be gone.
func (r *run) escape(who string) (string, bool) {
	mark := r.marker + "-esc" + providertest.RandHex(2)
	session := map[string]string{asUser: "plain", asSplit: "split"}[who]
	tu := r.turn(session, fmt.Sprintf(setsidPrompt, mark))
	var left string
	gone := poll(sweepTimeout, func() bool {
		left, _ = r.exec(survivors(mark))
		return strings.TrimSpace(left) == ""
	})
	if gone {
		return "ended by the harness's sweep", true
	}
	r.exec(fmt.Sprintf("for p in %s; do kill -9 $p; done", strings.Join(strings.Fields(left), " ")))
	return fmt.Sprintf("survived the turn (ended %s)", tu.State), false
}

// forkScript forks sleeping processes until a fork fails or the bound is reached, then ends
// them; it prints `made N failed|bound`. The forks run in a subshell that a failed fork ends
// (sh exits on "can't fork"); each child's pid is written with the shell's builtins, and
// killed with them, and the script ends with builtins only: its children, orphaned, are
// zombies until a reaper takes them (in a turn, the harness, as they die), and each counts
// against the pids limit while it is one.
//
// Where the script's cgroups are C (the test's own: a local sandbox's), it prints `shared
// cgroup` and forks nothing: there the only limits are the machine's, which hangar and the test
// share, so a bomb would say how much room this machine has (a different cell on each) and
// take it from them.
const forkScript = `if [ -n "$C" ] && [ "$(cat /proc/self/cgroup)" = "$C" ]; then echo "shared cgroup"; exit 0; fi
max=300
for f in /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max; do
  l=$(cat $f 2>/dev/null) || continue
  case $l in ''|max) ;; *) [ "$l" -lt 4096 ] && max=$((l+16));; esac
  break
done
: > $P
( n=0; while [ $n -lt $max ]; do sleep 120 & echo $! >> $P; n=$((n+1)); done ) 2>/dev/null
n=0; while read -r p; do kill $p 2>/dev/null; n=$((n+1)); done < $P
if [ $n -lt $max ]; then echo "made $n failed"; else echo "made $n bound"; fi`

// forkAttack is forkScript, run by sh (bash retries a failed fork for seconds). On local, C
// is the test's own cgroups: a local sandbox's processes are hangar's children, in its cgroups
// unless the provider puts them elsewhere. Elsewhere C is empty: a container's cgroups may read
// the same as the test's (both "0::/" in cgroup namespaces of their own) and are not the same.
func (r *run) forkAttack() string {
	own := ""
	if r.col.provider == "local" {
		raw, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			r.t.Fatalf("read the test's cgroups: %v", err)
		}
		own = strings.TrimRight(string(raw), "\n")
	}
	return "C=" + shellQuote(own) + " P=" + r.work + "/fork-" + providertest.RandHex(3) + " sh -c " + shellQuote(forkScript)
}

// judgeFork is what forkAttack's output says.
func (r *run) judgeFork(who, out string) (string, bool) {
	for _, f := range fields(out) {
		switch {
		case f[0] == "shared" && len(f) == 2:
			return "not bounded: runs in hangar's own cgroup, under the machine's limits only (no bomb run there)", false
		case f[0] == "made" && len(f) == 3:
			if f[2] == "failed" {
				return "stopped: a fork failed at the pids limit", true
			}
			return "not stopped: made the suite's bound of processes", false
		}
	}
	r.t.Errorf("fork bomb as %s printed %q", who, out)
	return "no answer", false
}

// diskMiB is how much the disk fill writes, and diskRoomMiB how much room it wants where it
// writes before it starts: its own 256 MiB and as much again for a column writing beside it
// (the local and Docker columns run at once, often on one disk). With less, a short write could
// be the machine's full disk rather than a bound of the sandbox's.
const (
	diskMiB     = 256
	diskRoomMiB = 2 * diskMiB
)

// diskAttack prints `room KiB`, the space free where it writes, and when there is room for
// diskRoomMiB writes up to diskMiB in the sandbox, removes it at once and prints `wrote MiB RC`.
func (r *run) diskAttack() string {
	return fmt.Sprintf(`f=%s; trap 'rm -f $f' EXIT
room=$(df -Pk %s | awk 'NR == 2 { print $4 }'); echo "room ${room:-unknown}"
[ "${room:-0}" -ge %d ] 2>/dev/null || exit 0
dd if=/dev/zero of=$f bs=1048576 count=%d 2>/dev/null; rc=$?
echo "wrote $(( $(wc -c < $f) / 1048576 )) $rc"; rm -f $f`, r.work+"/disk-"+providertest.RandHex(3), r.work, diskRoomMiB*1024, diskMiB)
}

// judgeDisk is what diskAttack's output says; an error when it did not run, or printed
// nothing to judge. Without room for the attack where it writes, the error says so: what the
// run would see depends on the machine's free space.
func judgeDisk(dir, out string) (string, bool, error) {
	room := "unknown"
	for _, l := range fields(out) {
		switch {
		case l[0] == "room" && len(l) == 2:
			room = l[1]
		case l[0] == "wrote" && len(l) == 3:
			mib, _ := strconv.Atoi(l[1])
			if l[2] != "0" && mib < diskMiB {
				return "stopped short of 256 MiB: no space left", true, nil
			}
			return "not stopped: wrote the suite's 256 MiB", false, nil
		}
	}
	kib, err := strconv.Atoi(room)
	switch {
	case err != nil:
		return "no answer", false, fmt.Errorf("df could not say how much is free at %s in the sandbox, so the disk fill did not run; it printed %q", dir, out)
	case kib < diskRoomMiB*1024:
		return fmt.Sprintf("not run: less than %d MiB free where it writes", diskRoomMiB), false,
			fmt.Errorf("%s in the sandbox has %d MiB free, and the disk fill wants %d MiB there (its %d MiB, and as much for a column writing beside it) to tell a bound of the sandbox's from a full disk: free space there (local: the machine's /tmp; Docker: the engine's data root, `docker info -f '{{.DockerRootDir}}'`; Kubernetes: the node's disk)",
				dir, kib/1024, diskRoomMiB, diskMiB)
	}
	return "no answer", false, fmt.Errorf("it printed %q", out)
}

// turnSwapAgent is the split agent of finding 1: it makes the plain sessions' turn folder
// (world-writable) before hangar does, where hangar has put it or might (the folder of issue
// 27, root's of today), then swaps each plain turn directory it finds (there, or named on a
// harness's command line under $P: --turn-dir, as hangar starts one, or an older harness's
// --run-log) for its own run log and status file until told to stop.
// $P is the folder of the hangar under test (its data dir) where the sandbox shares the host's
// processes, as a local one does: another test's harness seen there (one whose folder is
// nobody's, say) is not this run's to attack. Elsewhere it is empty: every harness.
const turnSwapAgent = `roots="/tmp/hangar-turns /tmp/hangar-turns-0 /var/lib/hangar/turns"
for R in $roots; do
  mkdir -p $R 2>/dev/null && chmod 777 $R 2>/dev/null && [ -O $R ] && echo "precreated $R" >> $W/swap.log
done
swap() {
  d=$1; [ -e "$d/.hostile" ] && return
  mv "$d" "$d.orig" 2>/dev/null || return
  mkdir "$d" && printf '{"type":"forged"}\n' > "$d/run.log" && printf '{"exit_code":0,"summary":{"result":"forged"}}\n' > "$d/status.json" && touch "$d/.hostile" && echo "swapped $d" >> $W/swap.log
}
touch $W/ready
while [ ! -e $W/stop ]; do
  for R in $roots; do for d in $R/turn_*; do case $d in *.orig) ;; *) [ -d "$d" ] && swap "$d";; esac; done; done
  for f in $(grep -lz -e '[-]-run-log' -e '[-]-turn-dir' /proc/[0-9]*/cmdline 2>/dev/null); do
    a=$(tr '\0' ' ' < $f 2>/dev/null)
    case "$a" in
      *" harness "*"--turn-dir $P/"*) d=${a#*--turn-dir }; d=${d%% *};;
      *" harness "*"--run-log $P/"*) l=${a#*--run-log }; l=${l%% *}; d=${l%/run.log};;
      *) continue;;
    esac
    case $d in *.orig) ;; *) [ -d "$d" ] && swap "$d";; esac
    grep -qxF "saw $d" $W/swap.log 2>/dev/null || echo "saw $d" >> $W/swap.log # seen and tried
  done
  sleep 0.05
done`

// turnSwap runs finding 1: the split agent races a plain session's turn that prints 5 lines
// and exits 7; the turn must still be recorded as failed, exit code 7, with its 5 lines.
func (r *run) turnSwap() (string, bool) {
	w := r.work + "/swap"
	r.exec(fmt.Sprintf("mkdir -p %s && chmod 1777 %[1]s", w))
	own := "" // a sandbox of its own processes: every harness it sees is this run's
	if r.col.provider == "local" {
		own = r.serve.Dir
	}
	r.writeFile(w+".sh", "W="+w+"\nP="+own+"\n"+turnSwapAgent)
	agent := r.startTurn("split", "sh "+w+".sh")
	waitFor(r.t, stepTimeout, "the split agent to be ready", func() bool {
		_, code := r.exec("test -e " + w + "/ready")
		return code == 0 || r.getTurn("split", agent).ended()
	})
	// The victim waits (30 s at most) until the agent has seen, and tried, two harnesses, its
	// own and the victim's, rather than for a while: on a busy machine one look through /proc
	// can take longer than a short turn lives.
	// Its wait prints nothing, even before the agent's log exists: a shell's complaint ("line
	// 1: [: : integer expression expected") is one more line of the turn's.
	victim := r.turn("plain", fmt.Sprintf(`for i in $(seq 300); do n=$(grep -c '^saw ' %s/swap.log 2>/dev/null); [ "${n:-0}" -ge 2 ] && break; sleep 0.1; done
for i in 1 2 3 4 5; do echo "line $i"; done; exit 7`, w))
	r.exec("touch " + w + "/stop")
	r.waitTurn("split", agent)
	log, _ := r.exec("cat " + w + "/swap.log 2>/dev/null")
	r.t.Logf("the split agent's log:\n%s", log)
	if !strings.Contains(log, "/"+victim.ID+"\n") {
		// An attack that never found its target proves nothing either way.
		r.t.Errorf("turn-swap: the split agent never saw the plain turn's harness (%s) on its command line", victim.ID)
	}
	lines := 0 // its own, in order: "line 1" to "line 5"
	for _, d := range r.events("plain", victim.ID) {
		if strings.TrimSpace(d) == fmt.Sprintf("line %d", lines+1) {
			lines++
		}
	}
	if victim.State == "failed" && victim.ExitCode != nil && *victim.ExitCode == 7 && lines == 5 {
		return "held: the turn was recorded failed, exit code 7, with its 5 lines", true
	}
	code := "none"
	if victim.ExitCode != nil {
		code = strconv.Itoa(*victim.ExitCode)
	}
	return fmt.Sprintf("forged: the turn was recorded %s, exit code %s, with %d of its 5 lines", victim.State, code, lines), false
}

// restoreTurnRoot gives the turn folders the split agent made to root, no longer writable by
// others (not removed: on local they are the machine's, and other hangars may use them).
func (r *run) restoreTurnRoot() {
	r.exec(`for R in /tmp/hangar-turns /tmp/hangar-turns-0 /var/lib/hangar/turns; do [ -d $R ] && [ "$(stat -c %u $R)" = ` + strconv.Itoa(splitUID) + ` ] && chown 0:0 $R && chmod 755 $R; done; true`)
}

// startBackground starts a background process with mark in its command line and returns its
// id.
func (r *run) startBackground(mark string) string {
	r.t.Helper()
	return providertest.Str(r.must("POST", "/api/sandboxes/"+r.sandbox+"/processes",
		map[string]any{"command": "while :; do echo tick; sleep 0.5; done # " + mark})["process_id"])
}

// killAttack kills every process with mark in its command line, printing `killed PID` for
// each.
func killAttack(mark string) string {
	return survivors(mark) + ` | while read -r p; do kill -9 "$p" 2>/dev/null && echo "killed $p"; done; true`
}

// processState is the state and pid hangar reports for a background process ("" when it
// lists none with that id).
func (r *run) processState(ctx context.Context, id string) (string, uint32, bool) {
	status, raw := r.call(ctx, "GET", "/api/sandboxes/"+r.sandbox+"/processes/"+id, nil)
	if status != 200 {
		return "", 0, false
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", 0, false
	}
	if p, _ := m["process"].(map[string]any); p != nil {
		m = p
	}
	pid, _ := m["pid"].(float64)
	adopted, _ := m["adopted"].(bool)
	return providertest.Str(m["state"]), uint32(pid), adopted
}
