package mcp

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// The session, turn and job tools let an agent drive another agent: make a session in a
// sandbox, start a turn in it (or start a job, which makes what it needs), see how it went,
// read its events, cancel it. They are thin: each action is one call of the turns service.

const turnsInstructions = " To drive another agent: the session tool makes a session (an agent in a sandbox), " +
	"the turn tool starts a turn in it with a prompt and tells you its state; the job tool does both in one go. " +
	"Their events are the resources hangar://sessions/<name>/events and hangar://jobs/<id>/events: read them with " +
	"?since=<next>, or subscribe to be told when there are new ones."

// sessionArgs are the session tool's arguments; which ones apply depends on the action.
type sessionArgs struct {
	Action  string            `json:"action" jsonschema:"create, list, get or events"`
	Session string            `json:"session,omitempty" jsonschema:"get, events: the session's name or id"`
	Name    string            `json:"name,omitempty" jsonschema:"create: the new session's name"`
	Sandbox string            `json:"sandbox,omitempty" jsonschema:"create: the sandbox the agent runs in; a token bound to one sandbox may leave it out"`
	Agent   string            `json:"agent,omitempty" jsonschema:"create: the agent: claude-code, codex or command"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"create: the agent's environment (API keys): passed to it, never shown again"`
	Since   int64             `json:"since,omitempty" jsonschema:"events: the seq to read after, the next of the previous read; default 0, from the first"`
	Limit   int               `json:"limit,omitempty" jsonschema:"events: at most this many events, 1 to 1000; default 100"`
}

// turnArgs are the turn tool's arguments.
type turnArgs struct {
	Action  string `json:"action" jsonschema:"start, get, cancel or list"`
	Session string `json:"session" jsonschema:"the session's name or id"`
	Prompt  string `json:"prompt,omitempty" jsonschema:"start: the prompt for the agent"`
	TurnID  string `json:"turn_id,omitempty" jsonschema:"get, cancel: the turn, as start or list gave it"`
}

// jobArgs are the job tool's arguments.
type jobArgs struct {
	Action     string            `json:"action" jsonschema:"start, get, cancel, list or events"`
	JobID      string            `json:"job_id,omitempty" jsonschema:"get, cancel, events: the job, as start or list gave it"`
	Prompt     string            `json:"prompt,omitempty" jsonschema:"start: the prompt for the agent"`
	Agent      string            `json:"agent,omitempty" jsonschema:"start: the agent: claude-code, codex or command"`
	Sandbox    string            `json:"sandbox,omitempty" jsonschema:"start: the sandbox to run in (or give new_sandbox)"`
	NewSandbox *newSandboxArgs   `json:"new_sandbox,omitempty" jsonschema:"start: a sandbox to make for the job, instead of sandbox"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"start: the agent's environment (API keys): passed to it, never shown again"`
	Since      int64             `json:"since,omitempty" jsonschema:"events: the job seq to read after, the next of the previous read; default 0"`
	Limit      int               `json:"limit,omitempty" jsonschema:"events: at most this many events, 1 to 1000; default 100"`
}

// newSandboxArgs is a sandbox a job makes, as POST /api/sandboxes takes it.
type newSandboxArgs struct {
	Name     string            `json:"name,omitempty" jsonschema:"its name; default job-<the job's id without job_>"`
	Provider string            `json:"provider,omitempty" jsonschema:"local, docker, kubernetes or e2b; default hangar's default provider"`
	Image    string            `json:"image,omitempty" jsonschema:"the container image (docker, kubernetes)"`
	Template string            `json:"template,omitempty" jsonschema:"the template (e2b)"`
	Workdir  string            `json:"workdir,omitempty" jsonschema:"its working directory"`
	Env      map[string]string `json:"env,omitempty" jsonschema:"environment for everything run in it"`
	Daemon   *bool             `json:"daemon,omitempty" jsonschema:"run hangar's daemon in it; default true"`
}

// defaultToolPage is how many events an events action returns without a limit.
const defaultToolPage = 100

func (h *Handler) addTurns() {
	addTool(h.server, &mcp.Tool{
		Name:  "session",
		Title: "Agent sessions",
		Description: "Agent sessions: an agent (claude-code, codex, command) in a sandbox, taking one turn at a time. " +
			"action create {name, sandbox, agent, env} makes one; list shows yours; get {session} shows one; events " +
			"{session, since, limit} returns its events after since and next (pass it as since next time). Start a turn " +
			"in a session with the turn tool. Its events are also the resource hangar://sessions/<name>/events.",
	}, h.session)
	addTool(h.server, &mcp.Tool{
		Name:  "turn",
		Title: "Turns of an agent session",
		Description: "Turns: one run of a session's agent with a prompt. action start {session, prompt} starts one and " +
			"returns it at once (state queued or running; one turn at a time per session); get {session, turn_id} shows " +
			"its state (queued, running, done, failed, cancelled), exit_code and summary; cancel {session, turn_id} stops " +
			"it; list {session} lists the session's turns.",
	}, h.turn)
	addTool(h.server, &mcp.Tool{
		Name:  "job",
		Title: "Agent jobs",
		Description: "Jobs: a prompt run by an agent unattended, in a sandbox (given by name, or new_sandbox to make one). " +
			"action start {prompt, agent, sandbox | new_sandbox, env} makes what it needs (a session, one turn) and " +
			"returns the job at once; get {job_id} shows its state and turn; cancel {job_id} stops it; list shows your " +
			"jobs; events {job_id, since, limit} returns its events after since and next. Its events are also the " +
			"resource hangar://jobs/<id>/events.",
	}, h.job)
}

func (h *Handler) session(ctx context.Context, req *mcp.CallToolRequest, in sessionArgs) (*mcp.CallToolResult, any, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, nil, errorf("This call carries no hangar token.")
	}
	if in.Session == "" && (in.Action == "get" || in.Action == "events") {
		return nil, nil, errorf("Say which session (the session argument: its name or id).")
	}
	op := "session " + in.Action
	switch in.Action {
	case "create":
		sb := in.Sandbox
		if sb == "" {
			sb = p.Sandbox
		}
		if sb == "" {
			return nil, nil, errorf("Say which sandbox the session's agent runs in (the sandbox argument).")
		}
		se, err := h.cfg.Turns.CreateSession(ctx, p, turns.CreateSessionRequest{Name: in.Name, Sandbox: sb, Agent: in.Agent, Env: in.Env})
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, from.Session(se, p.User), nil
	case "list":
		ss, err := h.cfg.Turns.ListSessions(ctx, p)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		out := []wire.Session{}
		for _, se := range ss {
			out = append(out, from.Session(se, p.User))
		}
		return nil, map[string]any{"sessions": out}, nil
	case "get":
		se, err := h.cfg.Turns.GetSession(ctx, p, in.Session)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		return nil, from.Session(se, p.User), nil
	case "events":
		return h.toolEvents(ctx, p, op, false, in.Session, in.Since, in.Limit)
	case "":
		return nil, nil, errorf("Say what to do (the action argument): create, list, get or events.")
	default:
		return nil, nil, errorf(fmt.Sprintf("There is no action %q: use create, list, get or events.", in.Action))
	}
}

func (h *Handler) turn(ctx context.Context, req *mcp.CallToolRequest, in turnArgs) (*mcp.CallToolResult, any, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, nil, errorf("This call carries no hangar token.")
	}
	if in.Session == "" {
		return nil, nil, errorf("Say which session (the session argument: its name or id).")
	}
	if in.TurnID == "" && (in.Action == "get" || in.Action == "cancel") {
		return nil, nil, errorf("Say which turn (the turn_id argument, as start or list gave it).")
	}
	op := "turn " + in.Action
	var (
		t   turns.Turn
		err error
	)
	switch in.Action {
	case "start":
		t, err = h.cfg.Turns.StartTurn(ctx, p, in.Session, in.Prompt)
	case "get":
		t, err = h.cfg.Turns.GetTurn(ctx, p, in.Session, in.TurnID)
	case "cancel":
		t, err = h.cfg.Turns.CancelTurn(ctx, p, in.Session, in.TurnID)
	case "list":
		ts, err := h.cfg.Turns.ListTurns(ctx, p, in.Session)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		out := []wire.Turn{}
		for _, t := range ts {
			out = append(out, from.Turn(t))
		}
		return nil, map[string]any{"turns": out}, nil
	case "":
		return nil, nil, errorf("Say what to do (the action argument): start, get, cancel or list.")
	default:
		return nil, nil, errorf(fmt.Sprintf("There is no action %q: use start, get, cancel or list.", in.Action))
	}
	if err != nil {
		return nil, nil, classify(h.log, op, err)
	}
	return nil, from.Turn(t), nil
}

func (h *Handler) job(ctx context.Context, req *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, any, error) {
	p, ok := principal(ctx, req)
	if !ok {
		return nil, nil, errorf("This call carries no hangar token.")
	}
	if in.JobID == "" && (in.Action == "get" || in.Action == "cancel" || in.Action == "events") {
		return nil, nil, errorf("Say which job (the job_id argument, as start or list gave it).")
	}
	op := "job " + in.Action
	var (
		j   turns.Job
		err error
	)
	switch in.Action {
	case "start":
		jr := turns.JobRequest{Prompt: in.Prompt, Agent: in.Agent, Sandbox: in.Sandbox, Env: in.Env}
		if ns := in.NewSandbox; ns != nil {
			jr.SandboxSpec = &sandbox.CreateRequest{Name: ns.Name, Provider: ns.Provider, Image: ns.Image, Template: ns.Template,
				Workdir: ns.Workdir, Env: ns.Env, Daemon: ns.Daemon}
		} else if jr.Sandbox == "" {
			if jr.Sandbox = p.Sandbox; jr.Sandbox == "" {
				return nil, nil, errorf("Say where the job runs: sandbox (a sandbox's name) or new_sandbox (one to make).")
			}
		}
		j, err = h.cfg.Turns.CreateJob(ctx, p, jr)
	case "get":
		j, err = h.cfg.Turns.GetJob(ctx, p, in.JobID)
	case "cancel":
		if _, err = h.cfg.Turns.CancelJob(ctx, p, in.JobID); err == nil {
			j, err = h.cfg.Turns.GetJob(ctx, p, in.JobID)
		}
	case "list":
		js, err := h.cfg.Turns.ListJobs(ctx, p)
		if err != nil {
			return nil, nil, classify(h.log, op, err)
		}
		out := []wire.Job{}
		for _, j := range js {
			out = append(out, h.toJob(ctx, j))
		}
		return nil, map[string]any{"jobs": out}, nil
	case "events":
		return h.toolEvents(ctx, p, op, true, in.JobID, in.Since, in.Limit)
	case "":
		return nil, nil, errorf("Say what to do (the action argument): start, get, cancel, list or events.")
	default:
		return nil, nil, errorf(fmt.Sprintf("There is no action %q: use start, get, cancel, list or events.", in.Action))
	}
	if err != nil {
		return nil, nil, classify(h.log, op, err)
	}
	return nil, h.toJob(ctx, j), nil
}

// toolEvents is the events action: a page of events and next, as reading the resource gives.
func (h *Handler) toolEvents(ctx context.Context, p auth.Principal, op string, job bool, ref string, since int64, limit int) (*mcp.CallToolResult, any, error) {
	if limit == 0 {
		limit = defaultToolPage
	}
	if since < 0 {
		return nil, nil, errorf("since must be an event's seq: a whole number, 0 or more (the next of the previous read).")
	}
	if limit < 1 || limit > turns.MaxEventsPage {
		return nil, nil, errorf(fmt.Sprintf("limit must be a whole number from 1 to %d.", turns.MaxEventsPage))
	}
	page, err := h.eventsAfter(ctx, p, job, ref, since, limit)
	if err != nil {
		return nil, nil, classify(h.log, op, err)
	}
	return nil, page, nil
}

// toJob is j on the wire with its turn, if it has one yet.
func (h *Handler) toJob(ctx context.Context, j turns.Job) wire.Job {
	if t, err := h.cfg.Turns.JobTurn(ctx, j); err == nil {
		return from.Job(j, &t)
	}
	return from.Job(j, nil)
}
