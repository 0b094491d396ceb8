package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
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

// watchUpdates opens p's watch of a watch resource's directory, as a stream (kind watch) of
// its updates.
func (h *Handler) watchUpdates(ctx context.Context, p auth.Principal, uri string) (*stream.Stream, error) {
	if h.cfg.Watches == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	t, err := parseWatchURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if t.hasSince {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Subscribe to the watch without since; read it with &since= when told it changed."}
	}
	st, err := h.cfg.Watches.Updates(ctx, p, t.sandbox, t.path, t.recursive)
	if err != nil {
		return nil, h.resourceError(uri, "subscribe "+uri, err)
	}
	return st, nil
}
