package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// turnsRoutes mounts /api/sessions (user scope) and /api/jobs (user or jobs scope).
func (a *api) turnsRoutes(r chi.Router) {
	r.Route("/sessions", func(r chi.Router) {
		r.Use(a.requireScope(auth.ScopeUser))
		r.Post("/", a.createSession)
		r.Get("/", a.listSessions)
		r.Route("/{ref}", func(r chi.Router) {
			r.Get("/", a.getSession)
			r.Delete("/", a.deleteSession)
			r.Post("/turns", a.startTurn)
			r.Get("/turns", a.listTurns)
			r.Get("/turns/{id}", a.getTurn)
			r.Post("/turns/{id}/cancel", a.cancelTurn)
			r.Get("/events", a.sessionEvents)
			r.Get("/events/stream", a.sessionEventStream)
		})
	})
	r.Route("/jobs", func(r chi.Router) {
		r.Use(a.requireAnyScope(auth.ScopeUser, auth.ScopeJobs))
		r.Post("/", a.createJob)
		r.Get("/", a.listJobs)
		r.Get("/{id}", a.getJob)
		r.Post("/{id}/cancel", a.cancelJob)
		r.Get("/{id}/events", a.jobEvents)
		r.Get("/{id}/events/stream", a.jobEventStream)
	})
}

// requireAnyScope refuses tokens with none of the scopes (admins have every scope).
func (a *api) requireAnyScope(scopes ...auth.Scope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principal(r)
			if !slices.ContainsFunc(scopes, p.Has) {
				a.writeError(w, r, newError(CodeForbidden, "This token lacks the scope this needs.", nil))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

type createSessionRequest struct {
	Name    string            `json:"name"`
	Sandbox string            `json:"sandbox"`
	Agent   string            `json:"agent"`
	Env     map[string]string `json:"env"`
	splitRequest
}

// splitRequest is a session's (or job's) split: its agent runs as split_uid (default 1000),
// its harness as root.
type splitRequest struct {
	Split    bool    `json:"split"`
	SplitUID *uint32 `json:"split_uid"`
}

// uid checks the request and returns the agent's uid (0: the default).
func (sr splitRequest) uid() (uint32, error) {
	switch {
	case sr.SplitUID == nil:
		return 0, nil
	case !sr.Split:
		return 0, newError(CodeBadRequest, "split_uid goes with split: true.", nil)
	case *sr.SplitUID == 0:
		return 0, newError(CodeBadRequest, "split_uid 0 is root: a split session's agent runs as another uid.", nil)
	}
	return *sr.SplitUID, nil
}

func (a *api) createSession(w http.ResponseWriter, r *http.Request) {
	var req createSessionRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	uid, err := req.uid()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	se, err := a.Turns.CreateSession(r.Context(), principal(r), turns.CreateSessionRequest{Name: req.Name, Sandbox: req.Sandbox, Agent: req.Agent, Env: req.Env,
		Split: req.Split, SplitUID: uid})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, from.Session(se, principal(r).User))
}

func (a *api) listSessions(w http.ResponseWriter, r *http.Request) {
	ss, err := a.Turns.ListSessions(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := []wire.Session{}
	for _, se := range ss {
		out = append(out, from.Session(se, principal(r).User))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (a *api) getSession(w http.ResponseWriter, r *http.Request) {
	se, err := a.Turns.GetSession(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.Session(se, principal(r).User))
}

func (a *api) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := a.Turns.DeleteSession(r.Context(), principal(r), chi.URLParam(r, "ref")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type startTurnRequest struct {
	Prompt string `json:"prompt"`
}

// startTurn answers at once with the queued turn: {id, state, ...}.
func (a *api) startTurn(w http.ResponseWriter, r *http.Request) {
	var req startTurnRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	t, err := a.Turns.StartTurn(r.Context(), principal(r), chi.URLParam(r, "ref"), req.Prompt)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, from.Turn(t))
}

func (a *api) listTurns(w http.ResponseWriter, r *http.Request) {
	ts, err := a.Turns.ListTurns(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := []wire.Turn{}
	for _, t := range ts {
		out = append(out, from.Turn(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"turns": out})
}

func (a *api) getTurn(w http.ResponseWriter, r *http.Request) {
	t, err := a.Turns.GetTurn(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.Turn(t))
}

func (a *api) cancelTurn(w http.ResponseWriter, r *http.Request) {
	t, err := a.Turns.CancelTurn(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, from.Turn(t))
}

// defaultEventsPage is how many events a page holds without ?limit=.
const defaultEventsPage = 100

// eventsPage reads ?since= (a seq, default 0) and ?limit= (default 100, at most
// turns.MaxEventsPage).
func eventsPage(r *http.Request) (int64, int, error) {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, newError(CodeBadRequest, "since must be an event's seq: a whole number, 0 or more.", errors.New(v))
		}
		since = n
	}
	limit := defaultEventsPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > turns.MaxEventsPage {
			return 0, 0, newError(CodeBadRequest, "limit must be a whole number from 1 to "+strconv.Itoa(turns.MaxEventsPage)+".", errors.New(v))
		}
		limit = n
	}
	return since, limit, nil
}

// writeEvents writes a page: the events and next, the since of the next page.
func writeEvents(w http.ResponseWriter, evs []turns.Event, since int64, jobSeq bool) {
	writeJSON(w, http.StatusOK, from.Events(evs, since, jobSeq))
}

func (a *api) sessionEvents(w http.ResponseWriter, r *http.Request) {
	since, limit, err := eventsPage(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	evs, err := a.Turns.ListEvents(r.Context(), principal(r), chi.URLParam(r, "ref"), since, limit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeEvents(w, evs, since, false)
}

// toJob is j on the wire with its turn, if it has one yet.
func (a *api) toJob(r *http.Request, j turns.Job) wire.Job {
	if t, err := a.Turns.JobTurn(r.Context(), j); err == nil {
		return from.Job(j, &t)
	}
	return from.Job(j, nil)
}

// createJobRequest is POST /api/jobs: sandbox is a name, or an object (a sandbox spec, as
// POST /api/sandboxes takes) to make one for the job.
type createJobRequest struct {
	Prompt  string            `json:"prompt"`
	Agent   string            `json:"agent"`
	Sandbox json.RawMessage   `json:"sandbox"`
	Env     map[string]string `json:"env"`
	splitRequest
}

func (a *api) createJob(w http.ResponseWriter, r *http.Request) {
	var req createJobRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	uid, err := req.uid()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	jr := turns.JobRequest{Prompt: req.Prompt, Agent: req.Agent, Env: req.Env, Split: req.Split, SplitUID: uid}
	if len(req.Sandbox) == 0 || string(req.Sandbox) == "null" {
		a.writeError(w, r, newError(CodeBadRequest, `Say which sandbox the job runs in: "sandbox" is a sandbox's name, or a sandbox spec (an object as POST /api/sandboxes takes; {} for a new one with the defaults).`, nil))
		return
	}
	if err := json.Unmarshal(req.Sandbox, &jr.Sandbox); err != nil {
		var spec createSandboxRequest
		dec := json.NewDecoder(bytes.NewReader(req.Sandbox))
		dec.DisallowUnknownFields() // as strict as POST /api/sandboxes: a misspelt field is not ignored
		if err := dec.Decode(&spec); err != nil {
			a.writeError(w, r, newError(CodeBadRequest, "sandbox must be a sandbox's name or a sandbox spec (an object as POST /api/sandboxes takes).", err))
			return
		}
		jr.SandboxSpec = &sandbox.CreateRequest{Name: spec.Name, Provider: spec.Provider, Image: spec.Image, Template: spec.Template,
			Workdir: spec.Workdir, Env: spec.Env, Daemon: spec.Daemon}
	}
	j, err := a.Turns.CreateJob(r.Context(), principal(r), jr)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.toJob(r, j))
}

func (a *api) listJobs(w http.ResponseWriter, r *http.Request) {
	js, err := a.Turns.ListJobs(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := []wire.Job{}
	for _, j := range js {
		out = append(out, a.toJob(r, j))
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

func (a *api) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := a.Turns.GetJob(r.Context(), principal(r), chi.URLParam(r, "id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.toJob(r, j))
}

func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) {
	if _, err := a.Turns.CancelJob(r.Context(), principal(r), chi.URLParam(r, "id")); err != nil {
		a.writeError(w, r, err)
		return
	}
	j, err := a.Turns.GetJob(r.Context(), principal(r), chi.URLParam(r, "id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, a.toJob(r, j))
}

func (a *api) jobEvents(w http.ResponseWriter, r *http.Request) {
	since, limit, err := eventsPage(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	evs, err := a.Turns.ListJobEvents(r.Context(), principal(r), chi.URLParam(r, "id"), since, limit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeEvents(w, evs, since, true)
}

// sessionEventStream is GET /api/sessions/{ref}/events/stream: the session's events after
// since as SSE, then each as it is recorded. Each is a plain message (no event: line, so an
// EventSource's onmessage gets it) with id: its seq and data: the event's JSON.
func (a *api) sessionEventStream(w http.ResponseWriter, r *http.Request) {
	a.eventStream(w, r, func(since int64) (*stream.Stream, error) {
		return a.Turns.Follow(r.Context(), principal(r), chi.URLParam(r, "ref"), since)
	})
}

// jobEventStream is GET /api/jobs/{id}/events/stream: as sessionEventStream, with id: the
// event's job seq.
func (a *api) jobEventStream(w http.ResponseWriter, r *http.Request) {
	a.eventStream(w, r, func(since int64) (*stream.Stream, error) {
		return a.Turns.FollowJob(r.Context(), principal(r), chi.URLParam(r, "id"), since)
	})
}

func (a *api) eventStream(w http.ResponseWriter, r *http.Request, open func(since int64) (*stream.Stream, error)) {
	from, err := since(r, eventSeq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	st, err := open(from)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer st.Close()
	sse, err := a.startSSE(w, r)
	defer sse.release()
	if err != nil {
		st.End(stream.ReasonClient)
		return
	}
	reason := a.pump(sse.context(), st, sse)
	sse.closeEvent(reason)
	sse.send()
}
