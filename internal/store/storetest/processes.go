package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

func newProcess(id string, started time.Time) store.Process {
	return store.Process{
		ID: id, TokenID: "tok_1", User: "ada", Grant: "grant_1", Sandbox: "box", Command: "sleep 60", Cwd: "/workspace",
		Tag: "hangar:" + id + ":mac", PID: 4242, PTY: true, Daemon: true, State: "running", StartedAt: started,
	}
}

func testProcessLifecycle(t *testing.T, ctx context.Context, s store.Store) {
	now := time.UnixMilli(time.Now().UnixMilli())
	first, second := newProcess("p_1", now), newProcess("p_2", now.Add(time.Second))
	for _, p := range []store.Process{second, first} {
		if err := s.CreateProcess(ctx, p); err != nil {
			t.Fatalf("CreateProcess %s: %v", p.ID, err)
		}
	}
	if err := s.CreateProcess(ctx, first); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateProcess with a taken id = %v, want ErrConflict", err)
	}
	got, err := s.GetProcess(ctx, "p_1")
	if err != nil {
		t.Fatalf("GetProcess: %v", err)
	}
	if got.TokenID != "tok_1" || got.User != "ada" || got.Grant != "grant_1" || got.Sandbox != "box" || got.Command != "sleep 60" || got.Cwd != "/workspace" ||
		got.Tag != first.Tag || got.PID != 4242 || !got.PTY || !got.Daemon || got.State != "running" || got.ExitCode != nil ||
		!got.StartedAt.Equal(now) || !got.EndedAt.IsZero() {
		t.Errorf("GetProcess = %+v, want %+v", got, first)
	}
	running, err := s.ListRunningProcesses(ctx)
	if err != nil || len(running) != 2 || running[0].ID != "p_1" || running[1].ID != "p_2" {
		t.Fatalf("ListRunningProcesses = %+v, %v; want p_1 then p_2", running, err)
	}

	// How far its output was given out moves while it runs, and stays once it ended.
	if err := s.SetProcessOutput(ctx, "p_1", 1<<40); err != nil {
		t.Fatalf("SetProcessOutput: %v", err)
	}
	if got, err := s.GetProcess(ctx, "p_1"); err != nil || got.OutputEnd != 1<<40 {
		t.Errorf("OutputEnd = %d, %v; want %d", got.OutputEnd, err, int64(1<<40))
	}
	if err := s.SetProcessOutput(ctx, "p_none", 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetProcessOutput of no process = %v, want ErrNotFound", err)
	}

	ended := now.Add(time.Minute)
	if err := s.EndProcess(ctx, "p_1", 137, "signal: killed", ended); err != nil {
		t.Fatalf("EndProcess: %v", err)
	}
	// The first end recorded stays.
	if err := s.EndProcess(ctx, "p_1", 0, "exit status 0", ended.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EndProcess of an ended process = %v, want ErrNotFound", err)
	}
	if err := s.EndProcess(ctx, "p_none", 0, "", ended); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EndProcess of no process = %v, want ErrNotFound", err)
	}
	got, err = s.GetProcess(ctx, "p_1")
	if err != nil || got.State != "exited" || got.ExitCode == nil || *got.ExitCode != 137 || got.Status != "signal: killed" || !got.EndedAt.Equal(ended) {
		t.Errorf("ended process = %+v, %v", got, err)
	}
	running, err = s.ListRunningProcesses(ctx)
	if err != nil || len(running) != 1 || running[0].ID != "p_2" {
		t.Errorf("ListRunningProcesses after an end = %+v, %v; want only p_2", running, err)
	}
	if err := s.SetProcessOutput(ctx, "p_1", 5); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetProcessOutput of an ended process = %v, want ErrNotFound", err)
	}
	if got, err := s.GetProcess(ctx, "p_1"); err != nil || got.OutputEnd != 1<<40 {
		t.Errorf("OutputEnd after the end = %d, %v; want it kept", got.OutputEnd, err)
	}
	// A sandbox's processes: those running and those ended since the cutoff.
	other := newProcess("p_3", now.Add(2*time.Second))
	other.Sandbox = "other"
	if err := s.CreateProcess(ctx, other); err != nil {
		t.Fatalf("CreateProcess: %v", err)
	}
	for _, c := range []struct {
		sandbox string
		since   time.Time
		want    []string
	}{
		{"box", ended, []string{"p_1", "p_2"}},
		{"box", ended.Add(time.Millisecond), []string{"p_2"}},
		{"other", ended, []string{"p_3"}},
		{"", ended, []string{"p_1", "p_2", "p_3"}},
		{"", ended.Add(time.Millisecond), []string{"p_2", "p_3"}},
	} {
		got, err := s.ListProcesses(ctx, c.sandbox, c.since)
		var ids []string
		for _, p := range got {
			ids = append(ids, p.ID)
		}
		if err != nil || strings.Join(ids, " ") != strings.Join(c.want, " ") {
			t.Errorf("ListProcesses(%q, %v) = %v, %v; want %v", c.sandbox, c.since.Sub(ended), ids, err, c.want)
		}
	}
	if _, err := s.GetProcess(ctx, "p_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetProcess of no process = %v, want ErrNotFound", err)
	}

	// Only ended records older than the cutoff go.
	if n, err := s.DeleteEndedProcesses(ctx, ended); err != nil || n != 0 {
		t.Errorf("DeleteEndedProcesses up to its end = %d, %v; want 0 (p_1 ended at the cutoff)", n, err)
	}
	if n, err := s.DeleteEndedProcesses(ctx, ended.Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("DeleteEndedProcesses = %d, %v; want 1 (p_1; p_2 runs)", n, err)
	}
	if _, err := s.GetProcess(ctx, "p_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetProcess of a deleted process = %v, want ErrNotFound", err)
	}
	if _, err := s.GetProcess(ctx, "p_2"); err != nil {
		t.Errorf("GetProcess of the running one = %v", err)
	}
}
