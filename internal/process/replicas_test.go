package process

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// owners is a fake of the replicas' leases: a sandbox listed with a URL is another replica's.
type owners struct {
	mu        sync.Mutex
	elsewhere map[string]string
	asked     func(sandbox string) // called after each Owner that answered mine, if set
}

func (o *owners) Owner(_ context.Context, sandbox string) (string, bool, error) {
	o.mu.Lock()
	url, ok := o.elsewhere[sandbox]
	asked := o.asked
	o.mu.Unlock()
	if ok {
		return url, false, nil
	}
	if asked != nil {
		asked(sandbox)
	}
	return "", true, nil
}

func (o *owners) set(sandbox, url string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.elsewhere[sandbox] = url
}

// TestElsewhere: the processes of a sandbox another replica owns are neither started, listed
// nor read here; the error says where they are.
func TestElsewhere(t *testing.T) {
	t.Parallel()
	own := &owners{elsewhere: map[string]string{"box": "http://b:8080"}}
	h := newHarness(t, Config{Owners: own})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var e *ElsewhereError
	if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"}); !errors.As(err, &e) || e.URL != "http://b:8080" {
		t.Errorf("Start in another replica's sandbox: %v, want an ElsewhereError naming it", err)
	}
	if _, err := h.m.List(ctx, ada, "box"); !errors.As(err, &e) {
		t.Errorf("List: %v, want an ElsewhereError", err)
	}
	if _, err := h.m.Get(ctx, ada, "box", "p_1"); !errors.As(err, &e) {
		t.Errorf("Get: %v, want an ElsewhereError", err)
	}
	if url, err := h.m.Elsewhere(ctx, ada, "box"); err != nil || url != "http://b:8080" {
		t.Errorf("Elsewhere = %q, %v", url, err)
	}
	if url, err := h.m.Elsewhere(ctx, ada, "plain"); err != nil || url != "" {
		t.Errorf("Elsewhere of a sandbox of its own = %q, %v; want here", url, err)
	}
}

// TestReleaseThenAdopt: releasing a sandbox (its lease went to another replica) stops following
// its processes and ends the attachments here, but leaves their records running, so the
// replica that gains the sandbox adopts them.
func TestReleaseThenAdopt(t *testing.T) {
	t.Parallel()
	own := &owners{elsewhere: map[string]string{}}
	h := newHarness(t, Config{Owners: own})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.m.Attach(ctx, ada, "box", info.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h.m.Release("box")
	<-a.Stream.Done()
	if r := a.Stream.Reason(); r != stream.ReasonShutdown {
		t.Errorf("the attachment ended with %s, want shutdown", r)
	}
	a.Close()
	// Its follower stops: no stream is left open here.
	for total, _ := h.streams.Count(""); total != 0; total, _ = h.streams.Count("") {
		select {
		case <-ctx.Done():
			t.Fatalf("%d streams still open after Release: the follower runs on", total)
		case <-time.After(10 * time.Millisecond):
		}
	}
	rec, err := h.st.GetProcess(ctx, info.ID)
	if err != nil || rec.State != "running" {
		t.Fatalf("the record after Release: %+v, %v; want running", rec, err)
	}

	// Gained again (say, the other replica died): adopted from its record.
	h.m.AdoptSandbox(ctx, "box")
	got, err := h.m.Get(ctx, ada, "box", info.ID)
	if err != nil || !got.Adopted || got.State != StateRunning {
		t.Fatalf("after AdoptSandbox: %+v, %v; want it adopted, running", got, err)
	}
	if err := h.m.Input(ctx, ada, "box", info.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	if end := h.waitEnd(ctx, t, ada, info.ID); end.ExitCode == nil || *end.ExitCode != 0 {
		t.Errorf("end after adoption: %+v", end)
	}
	h.waitRecordEnded(ctx, t, info.ID)
}

// TestLimitCountsOtherReplicas: HANGAR_BACKGROUND_MAX_PER_TOKEN counts the token's processes
// that other replicas follow (their records say they run).
func TestLimitCountsOtherReplicas(t *testing.T) {
	t.Parallel()
	own := &owners{elsewhere: map[string]string{}}
	h := newHarness(t, Config{Owners: own, MaxPerToken: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// A process of ada's in another sandbox, followed by another replica.
	if err := h.st.CreateProcess(ctx, store.Process{ID: "p_other", TokenID: ada.TokenID, User: ada.User, Sandbox: "elsewhere",
		Command: "sleep 100", Tag: "hangar:p_other:x", PID: 1, Daemon: true, State: "running", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"}); !errors.As(err, &le) {
		t.Fatalf("a start past the limit counted across replicas: %v, want a LimitError", err)
	}
	if err := h.st.EndProcess(ctx, "p_other", 0, "exit status 0", time.Now()); err != nil {
		t.Fatal(err)
	}
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"})
	if err != nil {
		t.Fatalf("a start once the other ended: %v", err)
	}
	h.waitEnd(ctx, t, ada, info.ID)
}

// TestUserAndGrantLimitsCountOtherReplicas: HANGAR_BACKGROUND_MAX_PER_USER counts the user's
// processes that other replicas follow, whichever of its tokens started them, and
// HANGAR_BACKGROUND_MAX_PER_TOKEN counts a grant's processes there whichever of its tokens
// started them.
func TestUserAndGrantLimitsCountOtherReplicas(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		rec     store.Process // followed by another replica
		starter auth.Principal
		user    bool // the per-user limit refuses (else the grant's)
	}{
		{name: "user", cfg: Config{MaxPerUser: 1}, rec: store.Process{TokenID: "tok_gone", User: ada.User}, starter: ada, user: true},
		{name: "grant", cfg: Config{MaxPerToken: 1}, rec: store.Process{TokenID: "tok_expired", User: ada.User, Grant: "gr_1"},
			starter: auth.Principal{TokenID: "tok_refreshed", User: ada.User, Grant: "gr_1", Scopes: ada.Scopes}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.cfg.Owners = &owners{elsewhere: map[string]string{}}
			h := newHarness(t, c.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			rec := c.rec
			rec.ID, rec.Sandbox, rec.Command, rec.Tag, rec.PID, rec.Daemon, rec.State, rec.StartedAt =
				"p_other", "elsewhere", "sleep 100", "hangar:p_other:x", 1, true, "running", time.Now()
			if err := h.st.CreateProcess(ctx, rec); err != nil {
				t.Fatal(err)
			}
			var le *LimitError
			if _, err := h.m.Start(ctx, c.starter, "box", StartRequest{Command: "true"}); !errors.As(err, &le) || (le.User != "") != c.user {
				t.Fatalf("a start past the limit counted across replicas: %v, want the per-user one: %v", err, c.user)
			}
			if err := h.st.EndProcess(ctx, "p_other", 0, "exit status 0", time.Now()); err != nil {
				t.Fatal(err)
			}
			info, err := h.m.Start(ctx, c.starter, "box", StartRequest{Command: "true"})
			if err != nil {
				t.Fatalf("a start once the other ended: %v", err)
			}
			h.waitEnd(ctx, t, c.starter, info.ID)
		})
	}
}

// TestOfUserCountsOtherReplicas: a person's processes include those other replicas follow, as
// their records say (what the fleet's inbox shows of them).
func TestOfUserCountsOtherReplicas(t *testing.T) {
	t.Parallel()
	own := &owners{elsewhere: map[string]string{}}
	h := newHarness(t, Config{Owners: own})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.st.CreateProcess(ctx, store.Process{ID: "p_other", TokenID: ada.TokenID, User: ada.User, Sandbox: "elsewhere",
		Command: "false", Tag: "hangar:p_other:x", PID: 1, Daemon: true, State: "running", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.EndProcess(ctx, "p_other", 1, "exit status 1", time.Now()); err != nil {
		t.Fatal(err)
	}
	got := h.m.OfUser(ada.User)
	if len(got) != 1 || got[0].ID != "p_other" || got[0].State != StateExited || got[0].ExitCode == nil || *got[0].ExitCode != 1 {
		t.Fatalf("OfUser = %+v, want the process another replica followed, exited 1", got)
	}
}

// TestReleaseThenAdoptEnded: a process that ended before the sandbox's lease moved away and
// back (its record ended, say by the replica that followed it) is listed again as it ended,
// until Retention after its end.
func TestReleaseThenAdoptEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Owners: &owners{elsewhere: map[string]string{}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	info, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEnd(ctx, t, ada, info.ID)
	h.waitRecordEnded(ctx, t, info.ID)
	h.m.Release("box")
	h.m.AdoptSandbox(ctx, "box")
	got, err := h.m.Get(ctx, ada, "box", info.ID)
	if err != nil || got.State != StateExited || got.ExitCode == nil || *got.ExitCode != 4 || got.Status != "exit status 4" {
		t.Errorf("after AdoptSandbox: %+v, %v; want it listed, exited with 4", got, err)
	}
}

// TestReleaseAfterOwnershipCheck: a sandbox released (handed to another replica) just after a
// Start in it passed its ownership check, before the start counted itself under way, starts
// nothing here: the new owner may have adopted the sandbox's processes already, and a record
// written after that would be followed by nobody. The start asks again, and says where.
func TestReleaseAfterOwnershipCheck(t *testing.T) {
	t.Parallel()
	own := &owners{elsewhere: map[string]string{}}
	h := newHarness(t, Config{Owners: own})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var once sync.Once
	own.asked = func(sb string) {
		once.Do(func() {
			h.m.Release(sb)
			own.set(sb, "http://b:8080")
		})
	}
	var e *ElsewhereError
	if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "cat"}); !errors.As(err, &e) || e.URL != "http://b:8080" {
		t.Fatalf("Start = %v, want an ElsewhereError naming the new owner", err)
	}
	recs, err := h.st.ListRunningProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Errorf("running records %v, want none: nothing was started", recs)
	}
}

// leaving is a replica's leases as it shuts down: every question is refused so.
type leaving struct{}

func (leaving) Owner(context.Context, string) (string, bool, error) {
	return "", false, fmt.Errorf("%w: this replica is leaving", stream.ErrShuttingDown)
}

// TestStartRefusedUnstartedAtShutdown: a start that this replica's shutdown refuses before it
// did anything in the sandbox (the lease is being handed over, or no stream may open any more)
// says so, so that a replica that forwarded it sends it to the sandbox's next owner; no
// process was started.
func TestStartRefusedUnstartedAtShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for name, h := range map[string]*harness{
		"leaving":    newHarness(t, Config{Owners: leaving{}}),
		"no streams": newHarness(t, Config{}),
	} {
		h.streams.Shutdown()
		var u *UnstartedError
		if _, err := h.m.Start(ctx, ada, "box", StartRequest{Command: "true"}); !errors.As(err, &u) || !errors.Is(err, stream.ErrShuttingDown) {
			t.Errorf("%s: Start = %v, want an UnstartedError for the shutdown", name, err)
		}
		if recs, err := h.st.ListProcesses(ctx, "box", time.Time{}); err != nil || len(recs) != 0 {
			t.Errorf("%s: process records %v, %v; want none", name, recs, err)
		}
	}
}
