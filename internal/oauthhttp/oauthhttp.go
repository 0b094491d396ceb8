// Package oauthhttp is the HTTP side of hangar's OAuth authorization server (internal/oauth):
// the endpoints (registration, authorization with its consent page, token, revocation) and the
// metadata documents (RFC 8414, RFC 9728). It is a transport beside rest and mcp: it reads
// requests, asks the oauth.Server what to do, and writes its answer in OAuth's terms; it
// holds no state of its own.
package oauthhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/hangar-dev/hangar/internal/addrlimit"
	"github.com/hangar-dev/hangar/internal/oauth"
)

// Config configures the endpoints.
type Config struct {
	// RegisterLimit bounds open client registrations (oauth.RegisterPath) per client address;
	// past it, 429 with Retry-After. Nil: unbounded.
	RegisterLimit *addrlimit.Limiter
	// ConsentLimit bounds the consent form's posts (POST oauth.AuthorizePath), each of which
	// checks a token a person pasted, per client address. Nil: unbounded.
	ConsentLimit *addrlimit.Limiter
	// TrustedProxies are the proxies whose X-Forwarded-For names the client address the limits
	// count (addrlimit.ClientAddr). Default none: the connection's peer.
	TrustedProxies []netip.Prefix
}

// Handler serves the OAuth endpoints of one oauth.Server.
type Handler struct {
	s   *oauth.Server
	cfg Config
	log *slog.Logger
}

// New returns the endpoints of s.
func New(s *oauth.Server, cfg Config) *Handler {
	return &Handler{s: s, cfg: cfg, log: s.Logger()}
}

// Routes mounts the metadata documents and the OAuth endpoints on r. None of them takes a
// bearer token: the consent page signs the person in with a form.
func (h *Handler) Routes(r chi.Router) {
	prm := sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               h.s.Resource(),
		AuthorizationServers:   []string{h.s.Issuer()},
		ScopesSupported:        oauth.GrantableScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "hangar",
	})
	// The document for /mcp, and the same at the root for clients that only look there.
	r.Handle(oauth.ResourceMetadataPath+"/mcp", prm)
	r.Handle(oauth.ResourceMetadataPath, prm)
	r.Get(oauth.ServerMetadataPath, h.serverMetadata)
	r.Get(oauth.AuthorizePath, h.authorizePage)
	r.Post(oauth.AuthorizePath, h.consent)
	// Browser-based clients (the MCP Inspector) call these from another origin. They take no
	// cookie and no ambient credential, so any origin may: what they need is in the request.
	for path, f := range map[string]http.HandlerFunc{oauth.RegisterPath: h.register, oauth.TokenPath: h.token, oauth.RevokePath: h.revoke} {
		r.Post(path, withCORS(f))
		r.Options(path, withCORS(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	}
}

// withCORS lets any origin call h (and its preflight pass).
func withCORS(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		h(w, r)
	}
}

// serverMetadata is the authorization server's metadata (RFC 8414).
type serverMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethods          []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods     []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
}

func (h *Handler) serverMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*") // public, for browser-based clients
	iss := h.s.Issuer()
	writeJSON(w, http.StatusOK, serverMetadata{
		Issuer:                            iss,
		AuthorizationEndpoint:             iss + oauth.AuthorizePath,
		TokenEndpoint:                     iss + oauth.TokenPath,
		RegistrationEndpoint:              iss + oauth.RegisterPath,
		RevocationEndpoint:                iss + oauth.RevokePath,
		ScopesSupported:                   append(slices.Clone(oauth.GrantableScopes), oauth.OfflineAccess),
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethods:          []string{"none"},
		RevocationEndpointAuthMethods:     []string{"none"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ClientIDMetadataDocumentSupported: h.s.ClientIDDocuments(),
		IssParameterSupported:             true,
	})
}

// httpError is an error response of the token, registration and revocation endpoints
// (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1): a status, a code from the RFC and a
// sentence.
type httpError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *httpError) Error() string { return e.Code + ": " + e.Description }

// writeError writes err: an *httpError as itself, an *oauth.Error with its status (401 for
// invalid_client, else 400), anything else as server_error (its cause logged).
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		he *httpError
		oe *oauth.Error
	)
	switch {
	case errors.As(err, &he):
	case errors.As(err, &oe):
		he = &httpError{status: http.StatusBadRequest, Code: oe.Code, Description: oe.Description}
		if oe.Code == "invalid_client" {
			he.status = http.StatusUnauthorized
		}
	default:
		h.log.Error("oauth request failed", "path", r.URL.Path, "err", err)
		he = &httpError{status: http.StatusInternalServerError, Code: "server_error", Description: oauth.SomethingWrong}
	}
	he = &httpError{status: he.status, Code: he.Code, Description: nqschar(he.Description)}
	if he.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="hangar"`) // RFC 6749 §5.2 for invalid_client
	}
	writeJSON(w, he.status, he)
}

// nqschar makes s fit error_description's character set (RFC 6749 §5.2: printable ASCII but
// " and \), should a sentence carry one from an error it quotes.
func nqschar(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\':
			return '/'
		case r < 0x20 || r > 0x7e:
			return '?'
		}
		return r
	}, s)
}

// allowed takes one of lim's requests for r's client address; when there is none, it says so
// (Retry-After, in whole seconds rounded up) and reports false: the caller writes its answer.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, lim *addrlimit.Limiter) (bool, string) {
	if lim == nil {
		return true, ""
	}
	ok, after := lim.Allow(addrlimit.ClientAddr(r, h.cfg.TrustedProxies))
	if ok {
		return true, ""
	}
	secs := int((after + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return false, fmt.Sprintf("Too many requests from your address; try again in %d seconds.", secs)
}

// bodyTimeout answers a body that did not arrive within the deadline the transport set on it
// (its reads fail with os.ErrDeadlineExceeded).
var bodyTimeout = &httpError{status: http.StatusRequestTimeout, Code: "invalid_request",
	Description: "The request body did not arrive in time; send it at once (HANGAR_BODY_TIMEOUT)."}

// maxForm bounds the form bodies of the endpoints.
const maxForm = 64 << 10

// parseForm reads a POST's form body (application/x-www-form-urlencoded), refusing a repeated
// parameter as RFC 6749 §3.1 and §3.2 require.
func parseForm(w http.ResponseWriter, r *http.Request) (url.Values, *httpError) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, bodyTimeout
		}
		return nil, badRequest("invalid_request", "The body must be a form (application/x-www-form-urlencoded).")
	}
	for _, v := range r.PostForm {
		if len(v) > 1 {
			return nil, badRequest("invalid_request", "A parameter is given more than once.")
		}
	}
	return r.PostForm, nil
}

func badRequest(code, description string) *httpError {
	return &httpError{status: http.StatusBadRequest, Code: code, Description: description}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
