package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// The event resources: a session's events (hangar://sessions/<name>/events, the name or the
// id) and a job's (hangar://jobs/<id>/events). Reading one returns {"events": [...], "next":
// n}: a page of the events after ?since=<seq> (default 0), and the seq to pass as since for the
// next page. resources/list shows the caller's sessions and jobs; subscriptions are in
// subscribe.go. Every failure to find one, or to be allowed to see it, is the same "Resource
// not found", so a URI never says whether someone else's session exists.
const (
	sessionTemplate = "hangar://sessions/{name}/events{?since}"
	jobTemplate     = "hangar://jobs/{id}/events{?since}"
	eventsMIME      = "application/json"
)

// readPage is how many events one read returns: as many as a REST page by default.
const readPage = 100

// eventsTarget is what an event resource's URI names.
type eventsTarget struct {
	job   bool   // a job's events, else a session's
	ref   string // the session's name or id, or the job's id
	since int64
	query bool // the URI has a query (a since)
}

// parseEventsURI reads an event resource's URI; the error is a sentence for a person.
func parseEventsURI(raw string) (eventsTarget, error) {
	notOurs := fmt.Errorf("%s is not a resource of hangar's: they are hangar://sessions/<name>/events, "+
		"hangar://jobs/<id>/events and hangar://sandboxes/<sandbox>/watch?path=<dir>", raw)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "hangar" || (u.Host != "sessions" && u.Host != "jobs") {
		return eventsTarget{}, notOurs
	}
	ref, ok := strings.CutSuffix(strings.TrimPrefix(u.Path, "/"), "/events")
	if !ok || ref == "" || strings.Contains(ref, "/") {
		return eventsTarget{}, notOurs
	}
	t := eventsTarget{job: u.Host == "jobs", ref: ref, query: u.RawQuery != ""}
	q := u.Query()
	for k := range q {
		if k != "since" {
			return eventsTarget{}, fmt.Errorf("%s: an event resource takes only ?since=<seq>, not %s", raw, k)
		}
	}
	if v := q.Get("since"); v != "" || q.Has("since") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return eventsTarget{}, fmt.Errorf("since must be an event's seq: a whole number, 0 or more (got %q)", v)
		}
		t.since = n
	}
	return t, nil
}

// addResources declares the event resources: their templates, their reads, and resources/list.
func (h *Handler) addResources() {
	h.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "session-events", Title: "A session's events", URITemplate: sessionTemplate, MIMEType: eventsMIME,
		Description: "A session's events (its agent's run-log lines, and turn.started / turn.finished), oldest first: " +
			`{"events": [...], "next": n}, a page of up to 100 after ?since=<seq> (default 0); read again with since=next ` +
			"for the rest. Subscribe to hangar://sessions/<name>/events to be told when there are new ones.",
	}, h.readEvents)
	h.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "job-events", Title: "A job's events", URITemplate: jobTemplate, MIMEType: eventsMIME,
		Description: "A job's events, as a session's, numbered by job seq: " +
			`{"events": [...], "next": n} after ?since=<seq>. Subscribe to hangar://jobs/<id>/events to be told of new ones.`,
	}, h.readEvents)
	h.server.AddReceivingMiddleware(h.listResources, readsOf(h.readEvents, "hangar://sessions/", "hangar://jobs/"))
}

// readsOf answers resources/read of a URI under one of prefixes with read itself, which says
// what is wrong with a URI. The SDK would first match the URI to a template by the template's
// expansion: a path's slashes percent-encoded, no query parameter but the template's. So
// ?path=/abs/dir, as a watch's description says to write it, was not found, and so was a URI
// with a misspelt parameter, where a sentence naming it is due.
func readsOf(read mcp.ResourceHandler, prefixes ...string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.ReadResourceRequest); ok && method == "resources/read" && r.Params != nil {
				for _, p := range prefixes {
					if strings.HasPrefix(r.Params.URI, p) {
						return read(ctx, r)
					}
				}
			}
			return next(ctx, method, req)
		}
	}
}

// callerOf is the caller of a request: the TokenInfo the SDK passes with it, else the one the
// bearer-token middleware put in ctx (the subscriptions a subscriptions/listen makes carry no
// Extra).
func callerOf(ctx context.Context, extra *mcp.RequestExtra) (auth.Principal, bool) {
	var info *sdkauth.TokenInfo
	if extra != nil {
		info = extra.TokenInfo
	}
	if info == nil {
		info = sdkauth.TokenInfoFromContext(ctx)
	}
	return principalFromTokenInfo(info)
}

func (h *Handler) readEvents(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, ok := callerOf(ctx, req.Extra)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	t, err := parseEventsURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	page, err := h.eventsAfter(ctx, p, t.job, t.ref, t.since, readPage)
	if err != nil {
		return nil, h.resourceError(uri, "read "+uri, err)
	}
	data, err := json.Marshal(page)
	if err != nil {
		return nil, h.resourceError(uri, "read "+uri, err)
	}
	return &mcp.ReadResourceResult{
		Contents:  []*mcp.ResourceContents{{URI: uri, MIMEType: eventsMIME, Text: string(data)}},
		Cacheable: mcp.Cacheable{CacheScope: "private"}, // one caller's, and changing
	}, nil
}

// eventsAfter is a page of a session's or job's events after since, and the next since.
func (h *Handler) eventsAfter(ctx context.Context, p auth.Principal, job bool, ref string, since int64, limit int) (wire.Events, error) {
	var (
		evs []turns.Event
		err error
	)
	if job {
		evs, err = h.cfg.Turns.ListJobEvents(ctx, p, ref, since, limit)
	} else {
		evs, err = h.cfg.Turns.ListEvents(ctx, p, ref, since, limit)
	}
	if err != nil {
		return wire.Events{}, err
	}
	return from.Events(evs, since, job), nil
}

// Resource errors in JSON-RPC's range for servers, one per problem the client can act on; the
// problem's own code goes in data.code too.
const (
	codeResourceConflict    = -32009 // the sandbox's state does not allow it (409 on REST)
	codeResourceLimit       = -32029 // a limit; data.retry_after says when to try again (429)
	codeResourceUnavailable = -32003 // the sandbox's provider or daemon does not answer (503)
)

// resourceError is a domain error on a resource as a JSON-RPC error: not found (whatever the
// reason: never whether it exists), invalid params for bad input, a code of hangar's for a
// conflict, a limit or a sandbox that does not answer, each with the problem table's sentence
// and its detail, else an internal error (logged, its cause not told).
func (h *Handler) resourceError(uri, op string, err error) error {
	pr := problem.Of(err)
	msg := pr.Message
	if pr.Detail != "" {
		msg += " (" + pr.Detail + ")"
	}
	var code int64
	switch pr.Code {
	case problem.CodeNotFound, problem.CodeForbidden, problem.CodeUnauthorized:
		return mcp.ResourceNotFoundError(uri)
	case problem.CodeBadRequest:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	case problem.CodeConflict:
		code = codeResourceConflict
	case problem.CodeLimit:
		code = codeResourceLimit
	case problem.CodeUnavailable:
		code = codeResourceUnavailable
	default:
		if !errors.Is(err, context.Canceled) {
			h.log.Error("mcp resource failed", "op", op, "err", err)
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: pr.Message}
	}
	data := map[string]any{"code": pr.Code}
	if pr.RetryAfter > 0 {
		data["retry_after"] = int(pr.RetryAfter.Round(time.Second).Seconds())
	}
	raw, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: code, Message: msg, Data: raw}
}

// listResources answers resources/list with the caller's own sessions and jobs (the SDK's
// list is one for everyone). A session of someone else's (an admin's view) is named by its
// id, which is unambiguous where a name may not be.
func (h *Handler) listResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "resources/list" {
			return next(ctx, method, req)
		}
		p, ok := callerOf(ctx, req.GetExtra())
		if !ok {
			return &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}, nil
		}
		ss, err := h.cfg.Turns.ListSessions(ctx, p)
		if err != nil {
			return nil, h.resourceError("", "list resources", err)
		}
		js, err := h.cfg.Turns.ListJobs(ctx, p)
		if err != nil {
			return nil, h.resourceError("", "list resources", err)
		}
		out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
		for _, se := range ss {
			ref := se.Name
			if se.Owner != p.User {
				ref = se.ID
			}
			out.Resources = append(out.Resources, &mcp.Resource{URI: wire.SessionEventsURI(ref), Name: "session " + ref + " events",
				MIMEType: eventsMIME, Description: fmt.Sprintf("Session %s's events (id %s, agent %s, sandbox %s, %d so far).", se.Name, se.ID, se.Agent, se.Sandbox, se.LastSeq)})
		}
		for _, j := range js {
			out.Resources = append(out.Resources, &mcp.Resource{URI: wire.JobEventsURI(j.ID), Name: "job " + j.ID + " events",
				MIMEType: eventsMIME, Description: fmt.Sprintf("Job %s's events (sandbox %s, %d so far).", j.ID, j.Sandbox, j.LastSeq)})
		}
		return out, nil
	}
}
