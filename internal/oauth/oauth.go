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
//
// This package is the authorization server's rules and records: clients, authorization
// requests, consent, grants, codes, token issue, refresh and revocation. Its HTTP side (the
// endpoints, the consent page, the metadata documents) is internal/oauthhttp, a transport.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/coder/quartz"

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
	// Clock tells codes', grants' and tokens' expiry and stamps what is stored. Default the
	// real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Server is the authorization server: what its endpoints (oauthhttp) decide, they ask it.
type Server struct {
	cfg   Config
	log   *slog.Logger
	fetch *http.Client // fetches Client ID Metadata Documents (fetchHTTPClient)
	docs  docCache
}

// Paths of the endpoints, under Issuer: the server's metadata names them, and its refusals
// point to them (oauthhttp serves them).
const (
	ResourceMetadataPath = "/.well-known/oauth-protected-resource"
	ServerMetadataPath   = "/.well-known/oauth-authorization-server"
	AuthorizePath        = "/oauth/authorize"
	TokenPath            = "/oauth/token"
	RegisterPath         = "/oauth/register"
	RevokePath           = "/oauth/revoke"
)

// GrantableScopes are the scopes a client may ask for: hangar's scopes that make sense at /mcp.
// mcp is needed for every request there; jobs is offered for clients that ask for it, and adds
// nothing at /mcp.
var GrantableScopes = []string{string(auth.ScopeMCP), string(auth.ScopeJobs)}

// OfflineAccess is the scope clients add to ask for refresh tokens (SEP-2207); hangar always
// issues one, so it is accepted and otherwise ignored.
const OfflineAccess = "offline_access"

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
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
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

// Issuer is hangar's public URL, the issuer (RFC 8414).
func (s *Server) Issuer() string { return s.cfg.Issuer }

// ClientIDDocuments reports whether clients may be known by Client ID Metadata Documents
// (Config.ClientIDHosts is not empty).
func (s *Server) ClientIDDocuments() bool { return len(s.cfg.ClientIDHosts) > 0 }

// Logger is the server's logger, for its endpoints.
func (s *Server) Logger() *slog.Logger { return s.log }

// Errors of this package, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrNoGrant means there is no grant of that id the caller may see (or it was revoked).
	ErrNoGrant error = &problem.Sentinel{Text: "no such grant", Code: problem.CodeNotFound,
		Message: "There is no such OAuth grant, or it is not yours."}
)

// Error is a refusal in OAuth's terms (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1): a
// code from the RFCs and a sentence for a person. invalid_client says the client is not one
// hangar knows; every other code, a request that is not valid.
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

func badRequest(code, description string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(description, args...)}
}

// NewSecret returns a random secret with prefix: 32 random bytes, base64url.
func NewSecret(prefix string) string {
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
