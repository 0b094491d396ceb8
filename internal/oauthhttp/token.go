package oauthhttp

import (
	"net/http"
	"net/url"
)

// tokenResponse is a successful token response (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// token is POST /oauth/token: the authorization_code and refresh_token grants.
func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	clientID, form, he := clientForm(w, r)
	if he != nil {
		h.writeError(w, r, he)
		return
	}
	t, err := h.s.Token(r.Context(), clientID, form)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: t.Access, TokenType: "Bearer", ExpiresIn: t.ExpiresIn, RefreshToken: t.Refresh, Scope: t.Scope})
}

// clientForm reads a token or revocation request's form and the client it names.
func clientForm(w http.ResponseWriter, r *http.Request) (string, url.Values, *httpError) {
	form, he := parseForm(w, r)
	if he != nil {
		return "", nil, he
	}
	id, he := clientOf(r, form)
	return id, form, he
}

// clientOf is the client id of a token or revocation request: the client_id parameter, or
// the user of HTTP Basic authentication (with an empty password: clients are public).
func clientOf(r *http.Request, form url.Values) (string, *httpError) {
	id := form.Get("client_id")
	if u, _, ok := r.BasicAuth(); ok {
		if u, err := url.QueryUnescape(u); err == nil && (id == "" || id == u) {
			id = u
		} else {
			return "", badRequest("invalid_request", "The client is named twice, differently.")
		}
	}
	if id == "" {
		return "", &httpError{status: http.StatusUnauthorized, Code: "invalid_client", Description: "client_id is missing."}
	}
	return id, nil
}

// revoke is POST /oauth/revoke (RFC 7009): 200 for any token, known or not (oauth.Server.Revoke).
func (h *Handler) revoke(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	clientID, form, he := clientForm(w, r)
	if he != nil {
		h.writeError(w, r, he)
		return
	}
	if err := h.s.Revoke(r.Context(), clientID, form); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
