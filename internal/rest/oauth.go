package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/hangar-dev/hangar/internal/wire"
)

// grantJSON is an OAuth grant as the API shows it.
type grantJSON struct {
	ID         string     `json:"id"`
	ClientID   string     `json:"client_id"`
	ClientName string     `json:"client_name"`
	User       string     `json:"user"`
	Scopes     []string   `json:"scopes"`
	Sandbox    string     `json:"sandbox,omitempty"`
	CreatedAt  *wire.Time `json:"created_at"`
}

func (a *api) listGrants(w http.ResponseWriter, r *http.Request) {
	gs, err := a.OAuth.ListGrants(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]grantJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, grantJSON{ID: g.ID, ClientID: g.ClientID, ClientName: g.ClientName, User: g.User, Scopes: g.Scopes, Sandbox: g.Sandbox, CreatedAt: wire.Stamp(g.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": out})
}

// revokeGrant revokes a grant and its tokens; their streams end at once (the OAuth server
// ends them).
func (a *api) revokeGrant(w http.ResponseWriter, r *http.Request) {
	if err := a.OAuth.RevokeGrant(r.Context(), principal(r), chi.URLParam(r, "id")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
