package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// testUserProcesses: a user's processes that run, or ended since a time, oldest first; not
// another user's, nor one that ended before.
func testUserProcesses(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	old, recent, running := newProcess("p_old", now), newProcess("p_recent", now.Add(time.Second)), newProcess("p_run", now.Add(2*time.Second))
	bobs := newProcess("p_bob", now)
	bobs.User, bobs.TokenID = "bob", "tok_2"
	for _, p := range []store.Process{old, recent, running, bobs} {
		if err := s.CreateProcess(ctx, p); err != nil {
			t.Fatalf("CreateProcess %s: %v", p.ID, err)
		}
	}
	if err := s.EndProcess(ctx, "p_old", 1, "exit status 1", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.EndProcess(ctx, "p_recent", 2, "exit status 2", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListUserProcesses(ctx, "ada", now.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "p_recent" || got[1].ID != "p_run" {
		t.Fatalf("ListUserProcesses = %+v, want p_recent then p_run", got)
	}
	if got[0].ExitCode == nil || *got[0].ExitCode != 2 || got[0].State == "running" {
		t.Errorf("the ended one = %+v, want its exit code 2", got[0])
	}
}
