package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Replicas is what the MCP handler asks of the replicas on its database (a *replicas.Cluster).
type Replicas interface {
	// ID is this replica's id.
	ID() string
	// Reach returns where the live replica id is reached (from the replicas table), or "" when
	// no live replica has that id.
	Reach(ctx context.Context, id string) (string, error)
}

// newSessionID is the id of a new 2025-era session (the SDK's GetSessionID). With several
// replicas it is "<replica id>.<random>", so that any replica can tell which one holds the
// session (toHolder); alone it is the random part only. The random part is crypto/rand.Text
// (26 base32 characters, 130 bits), the SDK's own: naming the replica makes an id no easier to
// guess, and a client that writes another replica's id into one reaches nothing it could not
// reach through the load balancer anyway.
func (h *Handler) newSessionID() string {
	if h.cfg.Forward == nil || h.cfg.Replicas == nil {
		return rand.Text()
	}
	return h.cfg.Replicas.ID() + "." + rand.Text()
}

// holderOf is the id of the replica a session id names, "" when it names none. The random
// part has no dot (base32); a replica id may.
func holderOf(sid string) string {
	i := strings.LastIndexByte(sid, '.')
	if i <= 0 {
		return ""
	}
	return sid[:i]
}

// sdkNoSession is the SDK's own text for a session it does not hold (a 404, which jsonErrors
// rewrites): a session this replica cannot reach is answered with the very same bytes, so an
// answer never tells whether a session or a replica exists.
const sdkNoSession = "session not found"

// toHolder forwards a request of a 2025-era session (a POST, the GET stream, the DELETE that
// ends it) whose id names another replica to that replica, whole and with its bearer token (the
// holder authenticates it again and checks the session is the token's), and reports true;
// false: serve it here (alone, a request forwarded here already — never twice —, no session
// id, a 2026-07-28 request, or a session id that names this replica or none). Where the
// holder is reached comes from the replicas table, never from the id. A session whose replica
// is not live (it left, it died, it never was) or cannot be reached is answered as the SDK
// answers a session it does not know, 404, so the client initializes a new one: a replica
// holds its sessions in memory, and they end with it. The forwarding is a stream of this
// replica's (forward.Forwarder.To), so the token's revocation ends it here, and so does this
// replica's shutdown for the session's GET stream; a POST runs to its answer within the
// shutdown grace.
func (h *Handler) toHolder(w http.ResponseWriter, r *http.Request) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	if h.cfg.Forward == nil || h.cfg.Replicas == nil || sid == "" || forward.Forwarded(r) ||
		r.Header.Get("Mcp-Protocol-Version") >= newProtocol {
		return false
	}
	holder := holderOf(sid)
	if holder == "" || holder == h.cfg.Replicas.ID() {
		return false
	}
	p, ok := principalFromTokenInfo(sdkauth.TokenInfoFromContext(r.Context()))
	if !ok {
		return false
	}
	url, err := h.cfg.Replicas.Reach(r.Context(), holder)
	switch {
	case err != nil:
		h.log.Warn("mcp: find the replica that holds a session", "replica", holder, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(problem.StoreRetryAfter.Seconds())))
		writeError(w, http.StatusServiceUnavailable, codeResourceUnavailable,
			"hangar's database does not answer, so this replica cannot find the one that holds the MCP session; try again in a moment.", "")
		return true
	case url == "":
		http.Error(w, sdkNoSession, http.StatusNotFound)
		return true
	}
	h.cfg.Forward.To(w, r, p, "", url, nil, nil, func(w http.ResponseWriter, r *http.Request, err error) {
		var le *stream.LimitError
		if errors.As(err, &le) || errors.Is(err, stream.ErrShuttingDown) {
			writeProblem(w, err) // refused here, before any try to reach the holder
			return
		}
		h.log.Warn("mcp: the replica that holds a session did not answer; answering as for an ended session", "replica", holder, "url", url, "err", err)
		http.Error(w, sdkNoSession, http.StatusNotFound)
	}, nil) // the session's GET stream just ends: the client opens it again
	return true
}

// toOwner forwards a 2026-07-28 (stateless) process tool call about a sandbox whose processes
// another replica follows to that replica, and reports true (docs/replicas.md); false: serve
// it here (alone, a request forwarded here already, a 2025-era session's request — toHolder
// has sent one of another replica's session there —, or anything else). checkBody has made the
// body re-readable. An owner that cannot be reached is asked for again, and the call served
// with local once the sandbox is this replica's.
func (h *Handler) toOwner(w http.ResponseWriter, r *http.Request, local http.Handler) bool {
	if h.cfg.Forward == nil || h.cfg.Processes == nil || forward.Forwarded(r) || r.Method != http.MethodPost ||
		r.Header.Get("Mcp-Protocol-Version") < newProtocol {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var call struct {
		Method string `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Sandbox string `json:"sandbox"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &call) != nil || call.Method != "tools/call" || call.Params.Name != "process" {
		return false
	}
	p, ok := principalFromTokenInfo(sdkauth.TokenInfoFromContext(r.Context()))
	if !ok {
		return false
	}
	sandbox := call.Params.Arguments.Sandbox
	if sandbox == "" {
		sandbox = p.Sandbox // a token bound to one sandbox may leave it out
	}
	if sandbox == "" {
		return false
	}
	owner, err := h.cfg.Processes.Elsewhere(r.Context(), p, sandbox)
	if err != nil || owner == "" {
		return false // served here: the tool says what is wrong, as for any call
	}
	again := func(ctx context.Context) (string, error) { return h.cfg.Processes.Elsewhere(ctx, p, sandbox) }
	h.cfg.Forward.To(w, r, p, sandbox, owner, again, local, func(w http.ResponseWriter, r *http.Request, err error) {
		writeError(w, http.StatusServiceUnavailable, codeInternal, "The hangar replica that follows this sandbox's processes did not answer; try again.", err.Error())
	}, nil)
	return true
}
