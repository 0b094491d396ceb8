package e2bapi

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// maxPage is the most sandboxes one page of a list has, and its default size (E2B's).
const maxPage = 100

// listQuery is GET /v2/sandboxes's query, as the SDK sends it.
type listQuery struct {
	metadata     map[string]string
	states       []string // running, paused; empty: both
	template     string
	startedAfter time.Time
	desc         bool // newest first (the default)
	limit        int
	after        cursor // zero: from the start
}

// cursor is where a page ends: the last sandbox's start and name, the order's key. The
// nextToken is its base64, opaque to the SDK.
type cursor struct {
	started int64 // Unix milliseconds
	name    string
}

func (c cursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.started, 10) + "/" + c.name))
}

func parseCursor(s string) (cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, false
	}
	ms, name, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	return cursor{n, name}, ok && err == nil && name != ""
}

func badQuery(format string, args ...any) error {
	return problem.New(problem.CodeBadRequest, fmt.Sprintf(format, args...), nil)
}

// parseListQuery reads the query. The SDK sends metadata as one parameter holding a query
// string of its own, each key and value escaped in it (metadata=team%3Dblue%26run%3D7), and
// state as running,paused.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{desc: true, limit: maxPage, template: q.Get("template")}
	if m := q.Get("metadata"); m != "" {
		pairs, err := url.ParseQuery(m)
		if err != nil {
			return lq, badQuery("The metadata filter is not key=value pairs joined by &: %v.", err)
		}
		lq.metadata = map[string]string{}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			val, err2 := url.QueryUnescape(vs[len(vs)-1])
			if err1 != nil || err2 != nil {
				return lq, badQuery("The metadata filter has a badly escaped key or value (%q).", k)
			}
			lq.metadata[key] = val
		}
	}
	for _, s := range q["state"] {
		for st := range strings.SplitSeq(s, ",") {
			if st != "running" && st != "paused" {
				return lq, badQuery("State %q is not one E2B lists: running or paused.", st)
			}
			lq.states = append(lq.states, st)
		}
	}
	if s := q.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return lq, badQuery("startedAfter %q is not an RFC 3339 time.", s)
		}
		lq.startedAfter = t
	}
	switch o := strings.ToLower(q.Get("order")); o {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return lq, badQuery("order %q is not asc or desc.", o)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			return lq, badQuery("limit %q is not a number from 1 to %d.", s, maxPage)
		}
		lq.limit = n
	}
	if s := q.Get("nextToken"); s != "" {
		c, ok := parseCursor(s)
		if !ok {
			return lq, badQuery("nextToken %.40q is not one this API gave.", s)
		}
		lq.after = c
	}
	return lq, nil
}

// keep reports whether the list shows sb.
func (lq listQuery) keep(sb sandbox.Sandbox) bool {
	if !alive(sb) || (len(lq.states) > 0 && !slices.Contains(lq.states, sb.State)) {
		return false
	}
	if lq.template != "" && templateOf(sb) != lq.template {
		return false
	}
	if !lq.startedAfter.IsZero() && !sb.CreatedAt.After(lq.startedAfter) {
		return false
	}
	for k, v := range lq.metadata {
		if got, ok := sb.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// compare orders sandboxes by start, then name, newest first when desc.
func (lq listQuery) compare(a, b cursor) int {
	c := cmp.Or(cmp.Compare(a.started, b.started), strings.Compare(a.name, b.name))
	if lq.desc {
		return -c
	}
	return c
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	sbs, err := a.Sandboxes.List(r.Context(), principal(r), false)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	key := func(sb sandbox.Sandbox) cursor { return cursor{sb.CreatedAt.UnixMilli(), sb.Name} }
	sbs = slices.DeleteFunc(sbs, func(sb sandbox.Sandbox) bool {
		return !lq.keep(sb) || (lq.after != cursor{} && lq.compare(key(sb), lq.after) <= 0)
	})
	slices.SortFunc(sbs, func(x, y sandbox.Sandbox) int { return lq.compare(key(x), key(y)) })
	if len(sbs) > lq.limit {
		sbs = sbs[:lq.limit]
		w.Header().Set("X-Next-Token", key(sbs[len(sbs)-1]).token())
	}
	out := make([]listed, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, toListed(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

// notOffered answers E2B's routes that hangar does not offer with E2B's 501 and a sentence
// (after the API key is checked, as E2B does).
func (a *api) notOffered(r chi.Router) {
	offer := func(what string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { a.writeError(w, r, notOffered(what)) }
	}
	templates := offer("hangar does not build E2B templates: its templates are the images HANGAR_E2B_TEMPLATES names.")
	for _, p := range []string{"/templates", "/templates/*", "/v2/templates", "/v2/templates/*", "/v3/templates", "/v3/templates/*"} {
		r.HandleFunc(p, templates)
	}
	snapshots := offer("hangar does not offer E2B's snapshots.")
	r.HandleFunc("/snapshots", snapshots)
	r.HandleFunc("/snapshots/*", snapshots)
	r.HandleFunc("/sandboxes/{id}/snapshots", snapshots)
	r.HandleFunc("/sandboxes/{id}/fork", offer("hangar does not fork sandboxes."))
	r.HandleFunc("/sandboxes/{id}/network", offer("hangar does not offer E2B's network rules."))
	r.HandleFunc("/sandboxes/{id}/refreshes", offer("hangar does not offer keep-alive refreshes; set a timeout with setTimeout."))
	r.HandleFunc("/sandboxes/{id}/resume", offer("use Sandbox.connect to resume a paused sandbox (POST /v2/sandboxes/{id}/connect)."))
	r.HandleFunc("/sandboxes/{id}/logs", offer("hangar does not keep a sandbox's logs for its E2B API."))
	volumes := offer("hangar does not offer E2B's volumes.")
	for _, p := range []string{"/volumes", "/volumes/*", "/volumecontent/*"} {
		r.HandleFunc(p, volumes)
	}
	secrets := offer("hangar does not offer E2B's secrets; pass what a sandbox needs in envs.")
	r.HandleFunc("/secrets", secrets)
	r.HandleFunc("/secrets/*", secrets)
	r.HandleFunc("/sandboxes", offer("use /v2/sandboxes: hangar offers E2B's v2 sandbox list and create (E2B's JS SDK 2.x calls them)."))
}
