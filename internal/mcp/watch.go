package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/watch"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// The watch resource: hangar://sandboxes/<sandbox>/watch?path=<dir>[&recursive=true]. While at
// least one client is subscribed, hangar watches the directory through the sandbox's daemon
// (one daemon watch shared by every subscriber of the same directory, see internal/watch);
// each change notifies the subscribers (at most every 250 ms each, as for events). Reading the
// URI, with &since=<next>, returns the changes kept after that: {"events": [...], "next": n}.
const (
	watchTemplate = "hangar://sandboxes/{sandbox}/watch{?path,recursive,since}"
	watchMIME     = "application/json"
)

// watchInstructions tell agents about the watch resource.
const watchInstructions = " To see what changes in a sandbox's directory as it happens, subscribe to the resource " +
	"hangar://sandboxes/<sandbox>/watch?path=<dir> and read it with &since=<next> when told it changed."

// errWatchEnded is a subscription's end because its daemon watch ended (its stream broke: the
// daemon died, say).
var errWatchEnded = errors.New("the watch ended")

// watchTarget is what a watch resource's URI names.
type watchTarget struct {
	sandbox   string
	path      string
	recursive bool
	since     int64
	hasSince  bool
}

// isWatchURI reports whether uri is (meant to be) a watch resource's.
func isWatchURI(uri string) bool { return strings.HasPrefix(uri, "hangar://sandboxes/") }

// parseWatchURI reads a watch resource's URI; the error is a sentence for a person.
func parseWatchURI(raw string) (watchTarget, error) {
	const form = "hangar://sandboxes/<sandbox>/watch?path=<dir>[&recursive=true]"
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "hangar" || u.Host != "sandboxes" {
		return watchTarget{}, fmt.Errorf("%s is not a watch resource: it is %s", raw, form)
	}
	name, ok := strings.CutSuffix(strings.TrimPrefix(u.Path, "/"), "/watch")
	if !ok || name == "" || strings.Contains(name, "/") {
		return watchTarget{}, fmt.Errorf("%s is not a watch resource: it is %s", raw, form)
	}
	t := watchTarget{sandbox: name}
	q := u.Query()
	for k := range q {
		if k != "path" && k != "recursive" && k != "since" {
			return watchTarget{}, fmt.Errorf("%s: a watch resource takes path, recursive and since, not %s", raw, k)
		}
	}
	if t.path = q.Get("path"); t.path == "" {
		return watchTarget{}, fmt.Errorf("%s names no directory: add ?path=<dir> (absolute, or relative to the sandbox's workdir)", raw)
	}
	if v := q.Get("recursive"); v != "" {
		if t.recursive, err = strconv.ParseBool(v); err != nil {
			return watchTarget{}, fmt.Errorf("recursive must be true or false (got %q)", v)
		}
	}
	if q.Has("since") {
		v := q.Get("since")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return watchTarget{}, fmt.Errorf("since must be a change's seq: a whole number, 0 or more (got %q)", v)
		}
		t.since, t.hasSince = n, true
	}
	return t, nil
}

// addWatchResource declares the watch resource's template and its read.
func (h *Handler) addWatchResource() {
	h.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "sandbox-watch", Title: "Changes in a sandbox's directory", URITemplate: watchTemplate, MIMEType: watchMIME,
		Description: "Subscribe to hangar://sandboxes/<sandbox>/watch?path=<dir> (add &recursive=true for the directories " +
			"under it) and hangar watches the directory for as long as you stay subscribed; each change notifies you. " +
			`Read the URI, with &since=<next>, for the changes after that: {"events": [{"seq", "ts", "name", "type"}], "next": n}, ` +
			"type create, write, remove, rename or chmod, the last 200 kept. The sandbox needs its daemon.",
	}, h.readWatch)
	h.server.AddReceivingMiddleware(readsOf(h.readWatch, "hangar://sandboxes/"))
}

func (h *Handler) readWatch(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, ok := callerOf(ctx, req.Extra)
	if !ok || h.cfg.Watches == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	t, err := parseWatchURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	evs, next, gap, watching, err := h.cfg.Watches.Peek(ctx, p, t.sandbox, t.path, t.recursive, t.since)
	if err != nil {
		return nil, h.resourceError(uri, "read "+uri, err)
	}
	data, err := json.Marshal(from.Changes(evs, next, gap, watching))
	if err != nil {
		return nil, h.resourceError(uri, "read "+uri, err)
	}
	return &mcp.ReadResourceResult{
		Contents:  []*mcp.ResourceContents{{URI: uri, MIMEType: watchMIME, Text: string(data)}},
		Cacheable: mcp.Cacheable{CacheScope: "private"},
	}, nil
}

// subscribeWatch starts watching for p: one of p's watches and one of its streams (kind
// watch), ended like any (revocation, the sandbox destroyed or paused, its lifetime, shutdown).
func (h *Handler) subscribeWatch(ctx context.Context, ss *mcp.ServerSession, p auth.Principal, uri string) error {
	if h.cfg.Watches == nil {
		return mcp.ResourceNotFoundError(uri)
	}
	t, err := parseWatchURI(uri)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if t.hasSince {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Subscribe to the watch without since; read it with &since= when told it changed."}
	}
	w, err := h.cfg.Watches.Open(ctx, p, t.sandbox, t.path, t.recursive)
	if err != nil {
		return h.resourceError(uri, "subscribe "+uri, err)
	}
	st, err := h.cfg.Streams.Open(ctx, stream.Options{Kind: stream.KindWatch, Principal: p, Sandbox: w.Sandbox, Lifetime: true, Unpaced: true})
	if err != nil {
		w.Close()
		return h.resourceError(uri, "subscribe "+uri, err)
	}
	h.startSubscription(ss, uri, &watchSource{w: w, start: w.Last()}, st)
	return nil
}

// watchSource is a held watch as a subscription's source.
type watchSource struct {
	w     *watch.Watch
	start int64
}

func (s *watchSource) Start() int64 { return s.start }
func (s *watchSource) Close()       { s.w.Close() }

func (s *watchSource) Wait(ctx context.Context, after int64) (int64, error) {
	for {
		changed := s.w.Changed()
		if last := s.w.Last(); last > after {
			return last, nil
		}
		if err := s.w.Err(); err != nil {
			return 0, fmt.Errorf("%w: %v", errWatchEnded, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
