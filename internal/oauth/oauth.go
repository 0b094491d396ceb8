// Package oauth is hangar's own OAuth 2.1 authorization server for remote MCP clients, as the
// MCP authorization specification (2025-11-25) describes it, and the metadata that makes /mcp
// a protected resource (RFC 9728). A client that knows only hangar's URL learns from a 401 on
// /mcp where the metadata is, registers (a Client ID Metadata Document, or RFC 7591 dynamic
// registration), sends the person to the consent page, and exchanges the code (PKCE S256
// only) for an access token and a refresh token.
//
// An access token is an ordinary hangar token (internal/auth): its user is the person who
// consented, its scopes and sandbox binding what they chose, its audience /mcp (RFC 8707: it is
// good nowhere else, not under /api), its expiry AccessTTL (or the expiry of the token the
// person consented with, if sooner) and its description the client's name. Revoking it, its
// grant, or the token the person consented with ends its streams like any token's. Errors of
// an authorization request are shown on hangar's consent page, never redirected to the client
// (RFC 9700 §4.11.2): the person is sent back only after allowing or denying. Refresh tokens rotate on each use; one used twice revokes its whole
// grant. Codes and refresh tokens are kept only as hashes.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/store"
)

// Config configures the authorization server.
type Config struct {
	// Store keeps clients, grants, codes and refresh tokens. Required.
	Store store.Store
	// Auth makes and checks the access tokens, and signs the person in on the consent page.
	// Required.
	Auth *auth.Authenticator
	// Issuer is hangar's public URL, as clients reach it: https://hangar.example.com, with no
	// path and no trailing slash. It is the issuer (RFC 8414), and Issuer+"/mcp" the resource
	// (RFC 8707). Required.
	Issuer string
	// ClientIDHosts lists the hosts (host or host:port) whose https URLs are accepted as client
	// ids, fetched as Client ID Metadata Documents; "*" accepts any host. Default none:
	// clients register dynamically (RFC 7591).
	ClientIDHosts []string
	// HTTPClient fetches Client ID Metadata Documents, always over https (loopback too: tests
	// serve documents with httptest.NewTLSServer and pass its client here). Its Transport must
	// be nil or an *http.Transport: hangar uses a copy whose dialer checks every address with
	// ClientIDAddrAllowed, and which uses no proxy. Default: a client with a 10s timeout.
	// Redirects are never followed.
	HTTPClient *http.Client
	// ClientIDAddrAllowed says whether hangar may connect to an address to fetch a Client ID
	// Metadata Document. It is asked at connect time about the address actually dialled, so
	// a name resolving (or rebound) to an internal address is refused too. Default PublicAddr:
	// never loopback, private, link-local, unspecified or other non-public addresses, so that
	// whoever picks a client id URL cannot make hangar probe its own network. Tests that serve
	// documents on loopback allow those.
	ClientIDAddrAllowed func(netip.Addr) bool
	// AccessTTL is how long an access token lives. Default 1h.
	AccessTTL time.Duration
	// RefreshTTL is how long a refresh token lives (each refresh makes a new one). Default 30
	// days.
	RefreshTTL time.Duration
	// CodeTTL is how long an authorization code may wait to be exchanged. Default 1 minute.
	CodeTTL time.Duration
	// EndToken ends the open streams of a token just revoked (stream.Registry.EndToken), so
	// they end at once rather than at the next recheck. Default: none.
	EndToken func(tokenID string)
	// RegisterLimit bounds open client registrations (RegisterPath) per client address; past
	// it, 429 with Retry-After. Nil: unbounded.
	RegisterLimit *addrlimit.Limiter
	// ConsentLimit bounds the consent form's posts (POST AuthorizePath), each of which checks
	// a token a person pasted, per client address. Nil: unbounded.
	ConsentLimit *addrlimit.Limiter
	// TrustedProxies are the proxies whose X-Forwarded-For names the client address the limits
	// count (addrlimit.ClientAddr). Default none: the connection's peer.
	TrustedProxies []netip.Prefix
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Server serves the OAuth endpoints and the metadata documents.
type Server struct {
	cfg   Config
	log   *slog.Logger
	fetch *http.Client // fetches Client ID Metadata Documents (fetchHTTPClient)
	docs  docCache
}

// Paths of the endpoints, under Issuer.
const (
	ResourceMetadataPath = "/.well-known/oauth-protected-resource"
	ServerMetadataPath   = "/.well-known/oauth-authorization-server"
	AuthorizePath        = "/oauth/authorize"
	TokenPath            = "/oauth/token"
	RegisterPath         = "/oauth/register"
	RevokePath           = "/oauth/revoke"
)

// The scopes a client may ask for: hangar's scopes that make sense at /mcp. mcp is needed for
// every request there; jobs is offered for clients that ask for it, and adds nothing at /mcp.
var grantableScopes = []string{string(auth.ScopeMCP), string(auth.ScopeJobs)}

// offlineAccess is the scope clients add to ask for refresh tokens (SEP-2207); hangar always
// issues one, so it is accepted and otherwise ignored.
const offlineAccess = "offline_access"

// New checks cfg and returns the server.
func New(cfg Config) (*Server, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oauth issuer %q: must be an http(s) URL with no path, query or fragment", cfg.Issuer)
	}
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	if cfg.ClientIDAddrAllowed == nil {
		cfg.ClientIDAddrAllowed = PublicAddr
	}
	fetch, err := fetchHTTPClient(cfg.HTTPClient, cfg.ClientIDAddrAllowed)
	if err != nil {
		return nil, err
	}
	if cfg.AccessTTL <= 0 {
		cfg.AccessTTL = time.Hour
	}
	if cfg.RefreshTTL <= 0 {
		cfg.RefreshTTL = 30 * 24 * time.Hour
	}
	if cfg.CodeTTL <= 0 {
		cfg.CodeTTL = time.Minute
	}
	if cfg.EndToken == nil {
		cfg.EndToken = func(string) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, fetch: fetch}, nil
}

// Resource is /mcp's canonical URL: the audience of every access token.
func (s *Server) Resource() string { return s.cfg.Issuer + "/mcp" }

// ResourceMetadataURL is where /mcp's protected resource metadata is served (RFC 9728 §3.1:
// the well-known path with the resource's path after it).
func (s *Server) ResourceMetadataURL() string {
	return s.cfg.Issuer + ResourceMetadataPath + "/mcp"
}

// Routes mounts the metadata documents and the OAuth endpoints on r. None of them takes a
// bearer token: the consent page signs the person in with a form.
func (s *Server) Routes(r chi.Router) {
	prm := sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.Resource(),
		AuthorizationServers:   []string{s.cfg.Issuer},
		ScopesSupported:        grantableScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "hangar",
	})
	// The document for /mcp, and the same at the root for clients that only look there.
	r.Handle(ResourceMetadataPath+"/mcp", prm)
	r.Handle(ResourceMetadataPath, prm)
	r.Get(ServerMetadataPath, s.serverMetadata)
	r.Get(AuthorizePath, s.authorizePage)
	r.Post(AuthorizePath, s.consent)
	// Browser-based clients (the MCP Inspector) call these from another origin. They take no
	// cookie and no ambient credential, so any origin may: what they need is in the request.
	for path, h := range map[string]http.HandlerFunc{RegisterPath: s.register, TokenPath: s.token, RevokePath: s.revoke} {
		r.Post(path, withCORS(h))
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

func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*") // public, for browser-based clients
	writeJSON(w, http.StatusOK, serverMetadata{
		Issuer:                            s.cfg.Issuer,
		AuthorizationEndpoint:             s.cfg.Issuer + AuthorizePath,
		TokenEndpoint:                     s.cfg.Issuer + TokenPath,
		RegistrationEndpoint:              s.cfg.Issuer + RegisterPath,
		RevocationEndpoint:                s.cfg.Issuer + RevokePath,
		ScopesSupported:                   append(slices.Clone(grantableScopes), offlineAccess),
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethods:          []string{"none"},
		RevocationEndpointAuthMethods:     []string{"none"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ClientIDMetadataDocumentSupported: len(s.cfg.ClientIDHosts) > 0,
		IssParameterSupported:             true,
	})
}

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNoGrant means there is no grant of that id the caller may see (or it was revoked).
	ErrNoGrant error = &problem.Sentinel{Text: "no such grant", Code: problem.CodeNotFound,
		Message: "There is no such OAuth grant, or it is not yours."}
)

// oauthError is an error response of the token, registration and revocation endpoints
// (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1): a code from the RFC and a sentence.
type oauthError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func badRequest(code, description string, args ...any) *oauthError {
	return &oauthError{status: http.StatusBadRequest, Code: code, Description: fmt.Sprintf(description, args...)}
}

// writeOAuthError writes err: an *oauthError as itself, anything else as server_error (its
// cause logged).
func (s *Server) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		s.log.Error("oauth request failed", "path", r.URL.Path, "err", err)
		oe = &oauthError{status: http.StatusInternalServerError, Code: "server_error", Description: "Something went wrong inside hangar; the server log has the details."}
	}
	oe = &oauthError{status: oe.status, Code: oe.Code, Description: nqschar(oe.Description)}
	if oe.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="hangar"`) // RFC 6749 §5.2 for invalid_client
	}
	writeJSON(w, oe.status, oe)
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

// newSecret returns a random secret with prefix: 32 random bytes, base64url.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand's documented contract)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// newID returns a random id with prefix: 24 hex digits.
func newID(prefix string) string { return ids.Hex(prefix, 24) }

// hash is how codes and refresh tokens are kept: hex SHA-256.
func hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// allowed takes one of lim's requests for r's client address; when there is none, it says so
// (Retry-After, in whole seconds rounded up) and reports false: the caller writes its answer.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, lim *addrlimit.Limiter) (bool, string) {
	if lim == nil {
		return true, ""
	}
	ok, after := lim.Allow(addrlimit.ClientAddr(r, s.cfg.TrustedProxies))
	if ok {
		return true, ""
	}
	secs := int((after + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return false, fmt.Sprintf("Too many requests from your address; try again in %d seconds.", secs)
}

// bodyTimeout answers a body that did not arrive within the deadline the transport set on it
// (its reads fail with os.ErrDeadlineExceeded).
var bodyTimeout = &oauthError{status: http.StatusRequestTimeout, Code: "invalid_request",
	Description: "The request body did not arrive in time; send it at once (HANGAR_BODY_TIMEOUT)."}

// maxForm bounds the form bodies of the endpoints.
const maxForm = 64 << 10

// parseForm reads a POST's form body (application/x-www-form-urlencoded), refusing a repeated
// parameter as RFC 6749 §3.1 and §3.2 require.
func parseForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
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
