// Package from turns the domain's values into wire's types where the transports (REST, MCP)
// answer with them: sandboxes, sessions, turns, jobs, and pages of processes, events and a
// watch's changes. What the domain streams it turns into wire's types itself (process.Info,
// turns.Event and watch.Event have a Wire method, the fleet is built in wire's shapes), and a
// page here is made of those. The domain imports wire but never this package.
package from

import (
	"encoding/json"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Sandbox is sb on the wire.
func Sandbox(sb sandbox.Sandbox) wire.Sandbox {
	return wire.Sandbox{Name: sb.Name, Owner: sb.Owner, Provider: sb.Provider, ProviderID: sb.ProviderID, State: sb.State,
		Reason: sb.Reason, Image: sb.Image, Template: sb.Template, Workdir: sb.Workdir, Env: sb.Env, Daemon: sb.HasDaemon,
		Metadata: sb.Metadata, EndAt: wire.Stamp(sb.EndAt), OnTimeout: sb.OnTimeout,
		CreatedAt: wire.Time(sb.CreatedAt), UpdatedAt: wire.Time(sb.UpdatedAt)}
}

// ExecResult is a command's result on the wire: its exit code only when it ended (ended
// false: it was let go still running), and how its stream ended when that was early (closed)
// or capped.
func ExecResult(res sandbox.ExecResult, ended bool, closed string, capped bool) wire.ExecResult {
	out := wire.ExecResult{Status: res.Status, TimedOut: res.TimedOut, Streamed: res.Streamed, Via: res.Via, Closed: closed, Capped: capped}
	if ended {
		code := res.ExitCode
		out.ExitCode = &code
	}
	out.Stdout, out.StdoutEncoding = wire.Text(res.Stdout)
	out.Stderr, out.StderrEncoding = wire.Text(res.Stderr)
	return out
}

// Processes is ps on the wire ([] for none).
func Processes(ps []process.Info) []wire.Process {
	out := make([]wire.Process, 0, len(ps))
	for _, i := range ps {
		out = append(out, i.Wire())
	}
	return out
}

// ProcessGap is g on the wire (nil for none).
func ProcessGap(g *process.Gap) *wire.Gap {
	if g == nil {
		return nil
	}
	w := wire.Gap(*g)
	return &w
}

// Session is se on the wire, as user sees it: its events' URI names it by its name for its
// owner, by its id for anyone else (an admin), whose own session that name may be.
func Session(se turns.Session, user string) wire.Session {
	keys := se.EnvKeys
	if keys == nil {
		keys = []string{}
	}
	ref := se.Name
	if se.Owner != user {
		ref = se.ID
	}
	return wire.Session{ID: se.ID, Name: se.Name, Sandbox: se.Sandbox, Agent: se.Agent, Owner: se.Owner, Job: se.JobID,
		EnvKeys: keys, LastSeq: se.LastSeq, CreatedAt: wire.Stamp(se.CreatedAt), Split: se.Split, SplitUID: se.SplitUID,
		Events: wire.SessionEventsURI(ref), State: se.State}
}

// Turn is t on the wire. A summary that is not valid JSON is left out.
func Turn(t turns.Turn) wire.Turn {
	out := wire.Turn{ID: t.ID, Session: t.SessionID, Job: t.JobID, State: string(t.State), Prompt: t.Prompt, ExitCode: t.ExitCode,
		Signal: t.Signal, Reason: t.Reason, CreatedAt: wire.Stamp(t.CreatedAt), StartedAt: wire.Stamp(t.StartedAt),
		EndedAt: wire.Stamp(t.EndedAt)}
	if t.Summary != "" && json.Valid([]byte(t.Summary)) {
		out.Summary = json.RawMessage(t.Summary)
	}
	return out
}

// Job is j on the wire with its turn, when it has one yet (nil: queued).
func Job(j turns.Job, t *turns.Turn) wire.Job {
	out := wire.Job{ID: j.ID, Sandbox: j.Sandbox, SandboxCreated: j.SandboxCreated, Session: j.SessionID,
		State: string(turns.TurnQueued), CreatedAt: wire.Stamp(j.CreatedAt), Events: wire.JobEventsURI(j.ID)}
	if t != nil {
		tw := Turn(*t)
		out.Turn, out.State = &tw, tw.State
	}
	return out
}

// Events is a page of events read after since: next is the last one's seq (its job seq when
// job), or since for an empty page.
func Events(evs []turns.Event, since int64, job bool) wire.Events {
	page := wire.Events{Events: make([]wire.Event, 0, len(evs)), Next: since}
	for _, e := range evs {
		page.Events = append(page.Events, e.Wire())
		page.Next = e.Seq
		if job {
			page.Next = e.JobSeq
		}
	}
	return page
}

// Changes is a page of a watch's events, as watch.Service.Peek gives it.
func Changes(evs []watch.Event, next int64, gap *watch.Gap, watching bool) wire.Changes {
	page := wire.Changes{Changes: make([]wire.Change, 0, len(evs)), Next: next, Watching: watching}
	for _, e := range evs {
		page.Changes = append(page.Changes, e.Wire())
	}
	if gap != nil {
		page.Gap = &wire.Gap{From: gap.From, To: gap.To}
	}
	return page
}
