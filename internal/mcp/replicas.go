package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/hangar-dev/hangar/internal/forward"
)

// toOwner forwards a 2026-07-28 (stateless) process tool call about a sandbox whose processes
// another replica follows to that replica, and reports true (docs/replicas.md); false: serve
// it here (alone, a request forwarded here already, a 2025-era session's request — the session
// lives on this replica — or anything else). checkBody has made the body re-readable. An owner
// that cannot be reached is asked for again, and the call served with local once the sandbox
// is this replica's.
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
	})
	return true
}
