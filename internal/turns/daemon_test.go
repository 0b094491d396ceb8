package turns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker"
	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
	"github.com/hangar-dev/hangar/internal/provider/local"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/runlogtest"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
	"github.com/hangar-dev/hangar/internal/stream"
)

// daemonFixture is a turns Service on real sandboxes, with a real daemon each: a local one
// (the host) and, when an engine answers, a Docker container. Its poll clock stands still
// unless a test moves it, so what is recorded while it stands still was followed.
type daemonFixture struct {
	st      store.Store
	streams *stream.Registry
	sbs     *sandbox.Manager
	clock   *quartz.Mock
	cfg     Config
	s       *Service
	sb      store.Sandbox
	root    string // a scratch directory in the sandbox (the turns' directories go where a Service puts them by default)
}

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

// onDaemons runs test on a local sandbox and a Docker one (skipped loudly without an engine,
// except in CI).
func onDaemons(t *testing.T, test func(t *testing.T, f *daemonFixture)) {
	for _, prov := range []string{"local", "docker"} {
		t.Run(prov, func(t *testing.T) {
			t.Parallel()
			if prov == "docker" && !dockerEngineUp() {
				if os.Getenv("CI") == "true" {
					t.Fatal("no Docker engine answers, and CI always starts one")
				}
				t.Skip("SKIPPING: no Docker engine answers here; start dockerd to run the Docker turn tests")
			}
			test(t, newDaemonFixture(t, prov))
		})
	}
}

func newDaemonFixture(t *testing.T, prov string) *daemonFixture {
	t.Helper()
	ctx := context.Background()
	raw, err := sqlitetest.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	st := notifying(raw)
	f := &daemonFixture{st: st, clock: quartz.NewMock(t), streams: stream.New(stream.Config{})}
	req := sandbox.CreateRequest{Name: providertest.UniqueName("turns"), Provider: prov}
	var p provider.Provider
	switch prov {
	case "local":
		p, err = local.New(local.Config{DataDir: t.TempDir(), EnvdBinary: hangarBin})
		f.root = t.TempDir()
	case "docker":
		var image string
		image, err = dockertest.EnsureImage(ctx, dockertest.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		req.Image = image
		var d *docker.Provider
		d, err = docker.New(docker.Config{EnvdBinary: hangarBin, Instance: "turns-test"})
		t.Cleanup(func() { d.Close() })
		p = d
		f.root = "/tmp/scratch"
	}
	if err != nil {
		t.Fatal(err)
	}
	f.sbs = sandbox.New(sandbox.Config{Store: st, Streams: f.streams, Providers: map[string]provider.Provider{prov: p}})
	t.Cleanup(f.sbs.Close)
	if _, err := f.sbs.Create(ctx, admin, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.sbs.Destroy(context.Background(), admin, req.Name); err != nil && !errors.Is(err, sandbox.ErrState) { // a test destroyed it
			t.Errorf("destroy %s: %v", req.Name, err)
		}
	})
	if f.sb, err = f.sbs.Get(ctx, admin, req.Name); err != nil {
		t.Fatal(err)
	}
	f.run(t, ctx, "mkdir -p "+f.root)
	// The sandbox was stamped on the wall clock: the Service's sessions come after it.
	f.clock.Set(time.Now()).MustWait(ctx)
	f.cfg = Config{Store: st, Sandboxes: FromManager(f.sbs), HarnessBinary: HarnessBinaries(hangarBin),
		PollInterval: 5 * time.Second, Clock: f.clock, Follow: true, Streams: f.streams}
	f.s = New(f.cfg)
	t.Cleanup(f.s.Close) // before the sandbox is destroyed
	return f
}

// run runs a short command in the sandbox, failing the test unless it exits 0.
func (f *daemonFixture) run(t *testing.T, ctx context.Context, command string) {
	t.Helper()
	out, code, err := FromManager(f.sbs).Run(ctx, f.sb, command, nil)
	if err != nil || code != 0 {
		t.Fatalf("%s: exit %d, %v: %s", command, code, err, out)
	}
}

// upload puts the local file at dst in the sandbox.
func (f *daemonFixture) upload(t *testing.T, ctx context.Context, src, dst string) {
	t.Helper()
	c, err := f.sbs.Daemon(f.sb)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(ctx, dst, bytes.NewReader(data)); err != nil {
		t.Fatalf("upload %s: %v", dst, err)
	}
}

// followerPIDs lists the daemon's processes following tu's run log (their command names the
// turn's status file).
func (f *daemonFixture) followerPIDs(t *testing.T, ctx context.Context, tu store.Turn) []uint32 {
	t.Helper()
	c, err := f.sbs.Daemon(f.sb)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pids []uint32
	for _, p := range procs {
		if cmd := strings.Join(p.Args, " "); strings.Contains(cmd, " tail -c +") && strings.Contains(cmd, path.Join(tu.Dir, "status.json")) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// followers is how many run-log followers are open in the registry (nothing else opens a
// stream here).
func (f *daemonFixture) followers() int {
	n, _ := f.streams.Count("")
	return n
}

func (f *daemonFixture) waitFollowers(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%d followers", n), func() bool { return f.followers() == n })
}

// gatedReplay waits for each gate file in turn, then prints the log's lines up to its cut (the
// next gate's first line), one every 2 ms, as the command agent replaying a fixture does.
func gatedReplay(log string, gates []string, cuts []int) string {
	var b bytes.Buffer
	from := 1
	for i, gate := range gates {
		b.WriteString(waitGate(gate))
		to := "$"
		if i < len(cuts) {
			to = fmt.Sprint(cuts[i] - 1)
		}
		fmt.Fprintf(&b, "sed -n '%d,%sp' %q | while IFS= read -r l; do printf '%%s\\n' \"$l\"; read -t 0.002 -u 9 || :; done; ", from, to, log)
		if i < len(cuts) {
			from = cuts[i]
		}
	}
	return b.String()
}

// TestFollowFixturesOnDaemons: each fixture log, replayed once its follower is counted in the
// registry, is recorded line by line while the poll clock stands still (so by following),
// every line once and in order; the turn ends when the follower sees the status file, and the
// follower leaves the registry with it.
func TestFollowFixturesOnDaemons(t *testing.T) {
	t.Parallel()
	dir := runlogtest.Dir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	onDaemons(t, func(t *testing.T, f *daemonFixture) {
		for i, file := range files {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			name := fmt.Sprintf("s%d", i)
			se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: name, Sandbox: f.sb.Name, Agent: "command"})
			if err != nil {
				t.Fatal(err)
			}
			log, gate := path.Join(f.root, filepath.Base(file)), path.Join(f.root, name+".gate")
			f.upload(t, ctx, file, log)
			tu, err := f.s.StartTurn(ctx, admin, name, gatedReplay(log, []string{gate}, nil))
			if err != nil {
				t.Fatal(err)
			}
			f.waitFollowers(t, ctx, 1)
			f.run(t, ctx, "touch "+shellQuote(gate))
			end := waitTurn(t, ctx, f.st, tu.ID)
			want, _ := os.ReadFile(file)
			checkEvents(t, ctx, f.st, se.ID, want)
			if end.State != store.TurnDone || end.ReadPos != int64(len(want)) {
				t.Errorf("%s: turn ended %s at %d, want done at %d", filepath.Base(file), end.State, end.ReadPos, len(want))
			}
			f.waitFollowers(t, ctx, 0)
		}
	})
}

// TestFollowFallsBackAndResumes: a follower that stops mid-log (killed, or the log truncated
// under it) leaves the registry; the next poll reads from the saved position and following
// starts again; every line is recorded once, in order.
func TestFollowFallsBackAndResumes(t *testing.T) {
	t.Parallel()
	file := filepath.Join(runlogtest.Dir(t), "codex_exec_edit_file-change_failed-command.jsonl")
	want, _ := os.ReadFile(file)
	cut := bytes.Index(want, []byte("\n"))
	for i := 0; i < 11; i++ { // the first 12 lines come before the break
		cut += 1 + bytes.Index(want[cut+1:], []byte("\n"))
	}
	first := want[:cut+1]
	cases := []struct {
		name   string
		break_ func(t *testing.T, ctx context.Context, f *daemonFixture, tu store.Turn)
	}{
		{"killed", func(t *testing.T, ctx context.Context, f *daemonFixture, tu store.Turn) {
			pids := f.followerPIDs(t, ctx, tu)
			if len(pids) != 1 {
				t.Fatalf("%d followers of the turn in the daemon, want 1", len(pids))
			}
			c, _ := f.sbs.Daemon(f.sb)
			if err := c.Signal(ctx, envd.ByPID(pids[0]), envd.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, ctx context.Context, f *daemonFixture, tu store.Turn) {
			// Cut, and once the follower has left, put back as it was: the log is the same
			// again, and what comes after is appended to it.
			f.run(t, ctx, "truncate -s 10 "+shellQuote(path.Join(tu.Dir, "run.log")))
			f.waitFollowers(t, ctx, 0)
			f.run(t, ctx, fmt.Sprintf("printf %%s %s > %s", shellQuote(string(first)), shellQuote(path.Join(tu.Dir, "run.log"))))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			onDaemons(t, func(t *testing.T, f *daemonFixture) {
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				defer cancel()
				se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
				if err != nil {
					t.Fatal(err)
				}
				log := path.Join(f.root, "fixture.jsonl")
				f.upload(t, ctx, file, log)
				gates := []string{path.Join(f.root, "gate1"), path.Join(f.root, "gate2")}
				polls := f.clock.Trap().NewTimer("turns", "poll")
				defer polls.Close()
				tu, err := f.s.StartTurn(ctx, admin, "s1", gatedReplay(log, gates, []int{13}))
				if err != nil {
					t.Fatal(err)
				}
				f.waitFollowers(t, ctx, 1)
				f.run(t, ctx, "touch "+shellQuote(gates[0]))
				waitFor(t, ctx, "the first 12 lines followed", func() bool {
					tt, _ := f.st.GetTurn(ctx, tu.ID)
					return tt.ReadPos == int64(len(first))
				})
				tt, _ := f.st.GetTurn(ctx, tu.ID)
				c.break_(t, ctx, f, tt)
				// The follower is gone and the watcher waits for its next poll: move the clock.
				call, err := polls.Wait(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if f.followers() != 0 {
					t.Errorf("%d followers while polling, want 0", f.followers())
				}
				call.MustRelease(ctx)
				f.clock.Advance(5 * time.Second).MustWait(ctx)
				f.waitFollowers(t, ctx, 1) // following again
				f.run(t, ctx, "touch "+shellQuote(gates[1]))
				waitTurn(t, ctx, f.st, tu.ID)
				checkEvents(t, ctx, f.st, se.ID, want)
			})
		})
	}
}

// TestFollowAcrossRestart: a Service closed while it follows a turn (serve stopping) stops its
// follower; the next one resumes following from the saved position; every line is recorded
// once, in order.
func TestFollowAcrossRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(runlogtest.Dir(t), "codex_exec_edit_file-change_failed-command.jsonl")
	want, _ := os.ReadFile(file)
	onDaemons(t, func(t *testing.T, f *daemonFixture) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		se, err := f.s.CreateSession(ctx, admin, CreateSessionRequest{Name: "s1", Sandbox: f.sb.Name, Agent: "command"})
		if err != nil {
			t.Fatal(err)
		}
		log := path.Join(f.root, "fixture.jsonl")
		f.upload(t, ctx, file, log)
		gates := []string{path.Join(f.root, "gate1"), path.Join(f.root, "gate2")}
		tu, err := f.s.StartTurn(ctx, admin, "s1", gatedReplay(log, gates, []int{13}))
		if err != nil {
			t.Fatal(err)
		}
		f.waitFollowers(t, ctx, 1)
		f.run(t, ctx, "touch "+shellQuote(gates[0]))
		waitEvents(t, ctx, f.st, se.ID, 1+12)
		f.s.Close()
		if n := f.followers(); n != 0 {
			t.Errorf("%d followers after Close, want 0", n)
		}
		tt, _ := f.st.GetTurn(ctx, tu.ID)
		waitFor(t, ctx, "the closed Service's follower gone from the sandbox", func() bool { return len(f.followerPIDs(t, ctx, tt)) == 0 })
		s2 := New(f.cfg)
		defer s2.Close()
		if err := s2.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		f.waitFollowers(t, ctx, 1)
		f.run(t, ctx, "touch "+shellQuote(gates[1]))
		waitTurn(t, ctx, f.st, tu.ID)
		checkEvents(t, ctx, f.st, se.ID, want)
	})
}
