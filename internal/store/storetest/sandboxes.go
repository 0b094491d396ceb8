package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func newSandbox(name, owner string) store.Sandbox {
	now := time.UnixMilli(time.Now().UnixMilli())
	return store.Sandbox{
		Name: name, Owner: owner, Provider: "docker", ProviderID: "c0ffee", State: "running",
		Image: "busybox", Workdir: "/workspace", Env: map[string]string{"A": "1"}, Daemon: true,
		DaemonURL: "http://127.0.0.1:1234", DaemonToken: "secret", Data: map[string]string{"port": "1234"},
		CreatedAt: now, UpdatedAt: now,
	}
}

func equalSandboxes(a, b store.Sandbox) bool {
	return a.Name == b.Name && a.Owner == b.Owner && a.Provider == b.Provider && a.ProviderID == b.ProviderID &&
		a.State == b.State && a.Reason == b.Reason && a.Image == b.Image && a.Template == b.Template &&
		a.Workdir == b.Workdir && maps.Equal(a.Env, b.Env) && a.Daemon == b.Daemon && a.DaemonURL == b.DaemonURL &&
		a.DaemonToken == b.DaemonToken && maps.Equal(a.Data, b.Data) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func testSandboxRoundTrip(t *testing.T, ctx context.Context, s store.Store) {
	want := newSandbox("api-refactor", "ada")
	if err := s.CreateSandbox(ctx, want); err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	got, err := s.GetSandbox(ctx, want.Name)
	if err != nil {
		t.Fatalf("GetSandbox: %v", err)
	}
	if !equalSandboxes(got, want) {
		t.Errorf("GetSandbox = %+v, want %+v", got, want)
	}
	if _, err := s.GetSandbox(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSandbox(unknown) = %v, want ErrNotFound", err)
	}
	want.State, want.Reason, want.Data, want.DaemonURL = "failed", "the daemon died", map[string]string{"pid": "7"}, ""
	want.UpdatedAt = want.UpdatedAt.Add(time.Second)
	if err := s.UpdateSandbox(ctx, want); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	if got, _ := s.GetSandbox(ctx, want.Name); !equalSandboxes(got, want) {
		t.Errorf("after UpdateSandbox = %+v, want %+v", got, want)
	}
	if err := s.UpdateSandbox(ctx, newSandbox("nope", "ada")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateSandbox(unknown) = %v, want ErrNotFound", err)
	}
}

func testSandboxNames(t *testing.T, ctx context.Context, s store.Store) {
	sb := newSandbox("box", "ada")
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if err := s.CreateSandbox(ctx, newSandbox("box", "bob")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateSandbox(taken name) = %v, want ErrConflict", err)
	}
	for _, state := range []string{"destroyed", "failed"} {
		sb.State = state
		if err := s.UpdateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		sb = newSandbox("box", "bob")
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatalf("CreateSandbox over a %s one: %v", state, err)
		}
		if got, _ := s.GetSandbox(ctx, "box"); got.Owner != "bob" {
			t.Fatalf("after replacing a %s sandbox the owner is %q", state, got.Owner)
		}
	}
	// Another user does not take a failed sandbox's name: its owner may still look at it.
	sb.State = "failed"
	if err := s.UpdateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, newSandbox("box", "ada")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateSandbox over another user's failed one = %v, want ErrConflict", err)
	}
	if got, _ := s.GetSandbox(ctx, "box"); got.Owner != "bob" {
		t.Fatalf("after another user's create, the owner is %q", got.Owner)
	}
	if err := s.CreateSandbox(ctx, newSandbox("other", "ada")); err != nil {
		t.Fatal(err)
	}
	list := func(owner string) []string {
		sbs, err := s.ListSandboxes(ctx, owner)
		if err != nil {
			t.Fatalf("ListSandboxes: %v", err)
		}
		var names []string
		for _, sb := range sbs {
			names = append(names, sb.Owner+"/"+sb.Name)
		}
		return names
	}
	if got := list("ada"); len(got) != 1 || got[0] != "ada/other" {
		t.Errorf("ListSandboxes(ada) = %v", got)
	}
	if got := list(""); len(got) != 2 || got[0] != "bob/box" || got[1] != "ada/other" {
		t.Errorf("ListSandboxes(all) = %v", got)
	}
}

// testSandboxStaysDestroyed: a write from a copy read before a destroy (a check of a daemon
// that broke because the sandbox was being destroyed) changes nothing, nor one from a copy of
// an earlier sandbox of the name.
func testSandboxStaysDestroyed(t *testing.T, ctx context.Context, s store.Store) {
	stale := newSandbox("gone", "ada")
	if err := s.CreateSandbox(ctx, stale); err != nil {
		t.Fatal(err)
	}
	destroyed := stale
	destroyed.State = "destroyed"
	if err := s.UpdateSandbox(ctx, destroyed); err != nil {
		t.Fatalf("UpdateSandbox(destroyed) = %v", err)
	}
	stale.State, stale.Reason = "failed", "the provider no longer has this sandbox"
	if err := s.UpdateSandbox(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateSandbox over a destroyed one = %v, want ErrConflict", err)
	}
	if got, _ := s.GetSandbox(ctx, "gone"); got.State != "destroyed" {
		t.Errorf("after a stale write the sandbox is %s, want destroyed", got.State)
	}
	newer := newSandbox("gone", "bob")
	newer.CreatedAt = stale.CreatedAt.Add(time.Second)
	if err := s.CreateSandbox(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSandbox(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateSandbox from an earlier sandbox of the name = %v, want ErrConflict", err)
	}
	if got, _ := s.GetSandbox(ctx, "gone"); got.Owner != "bob" || got.State != "running" {
		t.Errorf("after a stale write the sandbox is %s's and %s, want bob's and running", got.Owner, got.State)
	}
}

func testSandboxEnd(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	soon, later := newSandbox("soon", "ada"), newSandbox("later", "ada")
	soon.Metadata, soon.EndAt, soon.OnTimeout = map[string]string{"team": "blue", "run": "7"}, now.Add(time.Minute), store.OnTimeoutPause
	later.EndAt = now.Add(time.Hour)
	never := newSandbox("never", "ada")
	for _, sb := range []store.Sandbox{soon, later, never} {
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatalf("CreateSandbox %s: %v", sb.Name, err)
		}
	}
	got, err := s.GetSandbox(ctx, "soon")
	if err != nil || !maps.Equal(got.Metadata, soon.Metadata) || !got.EndAt.Equal(soon.EndAt) || got.OnTimeout != store.OnTimeoutPause {
		t.Fatalf("GetSandbox(soon) = metadata %v end %v on %q, %v; want %v %v pause", got.Metadata, got.EndAt, got.OnTimeout, err, soon.Metadata, soon.EndAt)
	}
	if got, _ := s.GetSandbox(ctx, "never"); !got.EndAt.IsZero() || len(got.Metadata) != 0 {
		t.Errorf("GetSandbox(never) = end %v metadata %v, want none", got.EndAt, got.Metadata)
	}
	due := func(at time.Time) []string {
		t.Helper()
		sbs, err := s.DueSandboxes(ctx, at, 10)
		if err != nil {
			t.Fatalf("DueSandboxes: %v", err)
		}
		var names []string
		for _, sb := range sbs {
			names = append(names, sb.Name)
		}
		return names
	}
	if got := due(now); len(got) != 0 {
		t.Errorf("due now = %v, want none", got)
	}
	if got := due(now.Add(2 * time.Hour)); !slices.Equal(got, []string{"soon", "later"}) {
		t.Errorf("due in 2h = %v, want [soon later] (earliest first; never is never due)", got)
	}
	// UpdateSandbox leaves the end and metadata alone; SetSandboxEnd moves the end.
	soon.State = "paused"
	if err := s.UpdateSandbox(ctx, soon); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	if got := due(now.Add(2 * time.Hour)); !slices.Equal(got, []string{"later"}) {
		t.Errorf("due with soon paused = %v, want [later]: only running sandboxes are due", got)
	}
	if err := s.SetSandboxEnd(ctx, "later", later.CreatedAt, time.Time{}); err != nil {
		t.Fatalf("SetSandboxEnd(later, never): %v", err)
	}
	if got := due(now.Add(2 * time.Hour)); len(got) != 0 {
		t.Errorf("due after later's end was cleared = %v, want none", got)
	}
	if err := s.SetSandboxEnd(ctx, "later", later.CreatedAt.Add(time.Second), now); !errors.Is(err, store.ErrConflict) {
		t.Errorf("SetSandboxEnd(another sandbox of the name) = %v, want ErrConflict", err)
	}
	if err := s.SetSandboxEnd(ctx, "nope", now, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetSandboxEnd(unknown) = %v, want ErrNotFound", err)
	}
}
