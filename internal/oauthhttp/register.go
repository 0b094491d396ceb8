package oauthhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// registration is the response to a registration (RFC 7591 §3.2.1).
type registration struct {
	ClientID         string `json:"client_id"`
	ClientIDIssuedAt int64  `json:"client_id_issued_at"`
	oauthex.ClientRegistrationMetadata
}

// register is dynamic client registration (RFC 7591), limited per client address
// (oauth.Server.Register decides).
func (h *Handler) register(w http.ResponseWriter, r *http.Request) {
	if ok, why := h.allowed(w, r, h.cfg.RegisterLimit); !ok {
		h.writeError(w, r, &httpError{status: http.StatusTooManyRequests, Code: "temporarily_unavailable",
			Description: why + " Open registration is limited per address (HANGAR_OAUTH_REGISTER_PER_MINUTE)."})
		return
	}
	var meta oauthex.ClientRegistrationMetadata
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxForm))
	if err := dec.Decode(&meta); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			h.writeError(w, r, bodyTimeout)
			return
		}
		h.writeError(w, r, badRequest("invalid_client_metadata", "The body must be the client's metadata as JSON (RFC 7591)."))
		return
	}
	c, err := h.s.Register(r.Context(), meta)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, registration{ClientID: c.ID, ClientIDIssuedAt: c.IssuedAt.Unix(), ClientRegistrationMetadata: c.Metadata})
}
