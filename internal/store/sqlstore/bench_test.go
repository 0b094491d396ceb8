package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/sqlite/sqlitetest"
)

// benchStore is a SQLite store with a session ses_a and its queued turn turn_1.
func benchStore(b *testing.B) store.Store {
	b.Helper()
	ctx := context.Background()
	s, err := sqlitetest.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	now := time.UnixMilli(time.Now().UnixMilli())
	if err := s.CreateSession(ctx, store.Session{ID: "ses_a", Name: "alpha", Owner: "ada", Sandbox: "box", CreatedAt: now}); err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTurn(ctx, store.Turn{ID: "turn_1", SessionID: "ses_a", Prompt: "fix the tests", State: store.TurnQueued, CreatedAt: now}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkGetTurn is the read a turn's follower makes most: one SELECT of one row.
func BenchmarkGetTurn(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetTurn(ctx, "turn_1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvents is one streamed line recorded: a transaction of an UPDATE ...
// RETURNING and an INSERT.
func BenchmarkAppendEvents(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	ev := []store.Event{{TS: time.Now(), Type: "line", Data: []byte(`{"type":"assistant","text":"ok"}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.AppendEvents(ctx, store.EventAppend{SessionID: "ses_a", TurnID: "turn_1", ReadPos: -1, Events: ev}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetSandbox is the read every exec, process start and daemon call makes first: one
// SELECT of one sandbox, with its JSON columns (a local sandbox's data, an env, metadata).
func BenchmarkGetSandbox(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	sb := store.Sandbox{Name: "box", Owner: "ada", Provider: "local", State: "running", Daemon: true,
		DaemonURL: "http://127.0.0.1:40000", DaemonToken: "secret",
		Env:       map[string]string{"LANG": "C.UTF-8"},
		Data:      map[string]string{"pid": "4242", "sid": "4242", "turns": "/var/lib/hangar/data/sandboxes/box/turns"},
		Metadata:  map[string]string{"team": "infra"},
		CreatedAt: time.UnixMilli(time.Now().UnixMilli())}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetSandbox(ctx, "box"); err != nil {
			b.Fatal(err)
		}
	}
}
