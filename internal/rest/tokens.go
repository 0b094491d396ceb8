package rest

import (
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/wire"
)

// tokenJSON is a token as the API shows it: never its secret, except Token right after creation.
type tokenJSON struct {
	ID          string     `json:"id"`
	Token       string     `json:"token,omitempty"`
	User        string     `json:"user"`
	Hint        string     `json:"hint,omitempty"`
	Description string     `json:"description,omitempty"`
	Scopes      []string   `json:"scopes"`
	Sandbox     string     `json:"sandbox,omitempty"`
	CreatedAt   *wire.Time `json:"created_at,omitempty"`
	ExpiresAt   *wire.Time `json:"expires_at"`
	Static      bool       `json:"static,omitempty"`
}

func toTokenJSON(t auth.TokenInfo) tokenJSON {
	out := tokenJSON{ID: t.ID, User: t.User, Hint: t.Hint, Description: t.Description, Sandbox: t.Sandbox, Static: t.Static, Scopes: []string{}}
	for _, s := range t.Scopes {
		out.Scopes = append(out.Scopes, string(s))
	}
	out.CreatedAt, out.ExpiresAt = wire.Stamp(t.CreatedAt), wire.Stamp(t.ExpiresAt)
	return out
}

type createTokenRequest struct {
	User        string     `json:"user"`
	Scopes      []string   `json:"scopes"`
	Sandbox     string     `json:"sandbox"`
	Description string     `json:"description"`
	ExpiresAt   *time.Time `json:"expires_at"` // RFC 3339
	ExpiresIn   string     `json:"expires_in"` // a Go duration: "24h", "30m"
}

func (a *api) createToken(w http.ResponseWriter, r *http.Request) {
	var req createTokenRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	scopes, err := auth.ParseScopes(req.Scopes)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	nt := auth.NewToken{User: req.User, Scopes: scopes, Sandbox: req.Sandbox, Description: req.Description}
	switch {
	case req.ExpiresAt != nil && req.ExpiresIn != "":
		a.writeError(w, r, newError(CodeBadRequest, "Give expires_at or expires_in, not both.", nil))
		return
	case req.ExpiresAt != nil:
		nt.ExpiresAt = *req.ExpiresAt
	case req.ExpiresIn != "":
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			a.writeError(w, r, newError(CodeBadRequest, "expires_in must be a positive duration of at most about 292 years (2562047h), like \"24h\" or \"30m\".", errors.New(req.ExpiresIn)))
			return
		}
		nt.ExpiresAt = a.Clock.Now().Add(d)
	}
	c, err := a.Auth.CreateToken(r.Context(), principal(r), nt)
	a.writeCreated(w, r, c, err)
}

// writeCreated answers a token just made (201, with its secret: the only time it is seen), or
// err.
func (a *api) writeCreated(w http.ResponseWriter, r *http.Request, c auth.Created, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := toTokenJSON(c.Token)
	out.Token = c.Secret
	writeJSON(w, http.StatusCreated, out)
}

func (a *api) listTokens(w http.ResponseWriter, r *http.Request) {
	ts, err := a.Auth.ListTokens(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]tokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTokenJSON(t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (a *api) revokeToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	ended, err := a.Auth.RevokeToken(r.Context(), principal(r), id)
	for _, tid := range ended { // the grants' access tokens, the tokens a bound token made
		a.Streams.EndToken(tid)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// Its streams end now rather than at the next recheck.
	a.Streams.EndToken(id)
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	out := map[string]any{"user": p.User, "token_id": p.TokenID, "scopes": p.Scopes, "static": p.Static}
	if p.Sandbox != "" { // bound; unbound tokens have no sandbox field, as in the token list
		out["sandbox"] = p.Sandbox
	}
	if !p.ExpiresAt.IsZero() {
		out["expires_at"] = wire.Stamp(p.ExpiresAt)
	}
	writeJSON(w, http.StatusOK, out)
}
