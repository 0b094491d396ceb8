package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/hangar-dev/hangar/internal/store"
)

// Client is a client as the endpoints see it, however it is known.
type Client struct {
	ID           string
	Name         string
	RedirectURIs []string
}

// Bounds of what a client may register or publish.
const (
	maxRedirectURIs = 10
	maxNameLen      = 100
	maxURILen       = 2000
	maxDocument     = 64 << 10 // a Client ID Metadata Document
)

// errUnknownClient is invalid_client: the client id is not one hangar knows or can fetch.
func errUnknownClient(format string, args ...any) *Error {
	return &Error{Code: "invalid_client", Description: fmt.Sprintf(format, args...)}
}

// lookupClient finds the client id: a Client ID Metadata Document when id is an https URL, else
// a registered client. Its errors are *Error invalid_client (or a store failure).
func (s *Server) lookupClient(ctx context.Context, id string) (Client, error) {
	if id == "" {
		return Client{}, badRequest("invalid_request", "client_id is missing.")
	}
	if strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://") {
		u, err := url.Parse(id)
		if err != nil || len(id) > maxURILen {
			return Client{}, errUnknownClient("The client id is not a valid URL.")
		}
		if err := s.clientIDAllowed(u); err != nil {
			return Client{}, errUnknownClient("The client id URL cannot be used: %v.", err)
		}
		return s.cachedClient(ctx, id)
	}
	c, err := s.cfg.Store.GetOAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, errUnknownClient("The client id is not one registered here; register at %s.", s.cfg.Issuer+RegisterPath)
	}
	if err != nil {
		return Client{}, err
	}
	return Client{ID: c.ID, Name: c.Name, RedirectURIs: c.RedirectURIs}, nil
}

// clientIDAllowed reports whether a Client ID Metadata Document may be fetched from u:
// https, a host on the allow-list, a path (not the root), and nothing a URL could hide
// behind (user info, a fragment, dot segments).
func (s *Server) clientIDAllowed(u *url.URL) error {
	switch {
	case u.Scheme != "https":
		return errors.New("a client id URL must be https")
	case u.User != nil || u.Fragment != "" || u.RawQuery != "":
		return errors.New("a client id URL may have no user info, query or fragment")
	case u.Path == "" || u.Path == "/":
		return errors.New("a client id URL must have a path")
	case slices.Contains(strings.Split(u.Path, "/"), ".") || slices.Contains(strings.Split(u.Path, "/"), ".."):
		return errors.New("a client id URL may have no . or .. segments")
	}
	for _, h := range s.cfg.ClientIDHosts {
		if h == "*" || strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return nil
		}
	}
	return errors.New("its host is not among those hangar accepts client id URLs from (HANGAR_OAUTH_CLIENT_ID_HOSTS)")
}

// errBadDocument is what the person (and the client) is told when a Client ID Metadata
// Document cannot be used, whatever the reason: the reason (a network error, a status, what
// the document holds) would tell whoever chose the URL about the network hangar runs in, so
// it goes to the log only.
func errBadDocument(id string) *Error {
	return errUnknownClient("The client's metadata document could not be fetched, or is not one hangar can use; the server log says why.")
}

// badDocument logs why the document at id cannot be used and returns errBadDocument.
func (s *Server) badDocument(id, why string, args ...any) *Error {
	s.log.Warn("oauth client metadata document refused", "client_id", id, "why", fmt.Sprintf(why, args...))
	return errBadDocument(id)
}

// fetchClient fetches and checks the Client ID Metadata Document at id
// (draft-ietf-oauth-client-id-metadata-document): JSON whose client_id is id itself. id has
// passed clientIDAllowed. The fetch connects only to the addresses Config.ClientIDAddrAllowed
// allows (fetchHTTPClient).
func (s *Server) fetchClient(ctx context.Context, id string) (Client, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return Client{}, s.badDocument(id, "make the request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetch.Do(req)
	if err != nil {
		return Client{}, s.badDocument(id, "fetch: %v", err)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "application/json" {
		return Client{}, s.badDocument(id, "answered %d %s, not 200 with JSON", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil || len(body) > maxDocument {
		return Client{}, s.badDocument(id, "could not be read whole (at most %d bytes): %v", maxDocument, err)
	}
	var doc struct { // the fields hangar uses; the rest is the client's own
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		RedirectURIs            []string `json:"redirect_uris"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Client{}, s.badDocument(id, "not valid JSON: %v", err)
	}
	if doc.ClientID != id {
		return Client{}, s.badDocument(id, "names client_id %q, not its own URL", doc.ClientID)
	}
	if m := doc.TokenEndpointAuthMethod; m != "" && m != "none" {
		return Client{}, s.badDocument(id, "asks for token_endpoint_auth_method %q; hangar takes public clients only (none)", m)
	}
	if err := checkRedirectURIs(doc.RedirectURIs); err != nil {
		return Client{}, s.badDocument(id, "%s", err.Description)
	}
	return Client{ID: id, Name: clientName(doc.ClientName, doc.RedirectURIs), RedirectURIs: doc.RedirectURIs}, nil
}

// clientName is a client's name for the consent page and the tokens list: the name it gives,
// cut to maxNameLen, or its first redirect URI's host.
func clientName(name string, redirects []string) string {
	name = strings.Join(strings.Fields(name), " ")
	if name == "" {
		if u, err := url.Parse(redirects[0]); err == nil {
			name = u.Host
		}
	}
	if r := []rune(name); len(r) > maxNameLen {
		name = string(r[:maxNameLen])
	}
	return name
}

// checkRedirectURIs checks a client's redirect URIs: 1 to maxRedirectURIs absolute URLs,
// https or http on a loopback address (a native app's listener, RFC 8252 §7.3), without a
// fragment (RFC 6749 §3.1.2).
func checkRedirectURIs(uris []string) *Error {
	if len(uris) == 0 || len(uris) > maxRedirectURIs {
		return &Error{Code: "invalid_redirect_uri", Description: fmt.Sprintf("Give 1 to %d redirect_uris.", maxRedirectURIs)}
	}
	bad := func(i int, why string) *Error {
		return &Error{Code: "invalid_redirect_uri", Description: fmt.Sprintf("redirect_uris[%d] %s.", i, why)}
	}
	for i, s := range uris {
		u, err := url.Parse(s)
		switch {
		case err != nil || len(s) > maxURILen || u.Host == "":
			return bad(i, "is not an absolute URL")
		case u.Fragment != "" || strings.Contains(s, "#"):
			return bad(i, "has a fragment")
		case !validHost(u.Hostname()):
			return bad(i, "has a host that is neither a DNS name nor an IP address")
		case u.Scheme == "https":
		case u.Scheme == "http" && isLoopback(u.Hostname()):
		default:
			return bad(i, "must be https, or http on a loopback address")
		}
	}
	return nil
}

// dnsName is a host name: dot-separated labels of letters, digits and inner hyphens (RFC 1123
// §2.1), perhaps with the root's trailing dot.
var dnsName = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// validHost reports whether host (a URL's Hostname) is a DNS name or an IP address (without
// an IPv6 zone), and nothing a browser or a log could read otherwise.
func validHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Zone() == ""
	}
	return len(host) <= 253 && dnsName.MatchString(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Registered is a client just registered: its id, when, and what hangar keeps of its metadata.
type Registered struct {
	ID       string
	IssuedAt time.Time
	Metadata oauthex.ClientRegistrationMetadata
}

// Register is dynamic client registration (RFC 7591). Clients are public: whatever
// token_endpoint_auth_method is asked for, the answer is none (§3.2.1 lets the server replace
// a requested value), and they prove themselves with PKCE. A refusal is an *Error.
func (s *Server) Register(ctx context.Context, meta oauthex.ClientRegistrationMetadata) (Registered, error) {
	if err := checkRedirectURIs(meta.RedirectURIs); err != nil {
		return Registered{}, err
	}
	if err := checkRegistration(meta); err != nil {
		return Registered{}, err
	}
	// The answer holds what hangar keeps and acts on, nothing it did not check.
	out := oauthex.ClientRegistrationMetadata{RedirectURIs: meta.RedirectURIs, ClientName: clientName(meta.ClientName, meta.RedirectURIs),
		TokenEndpointAuthMethod: "none", GrantTypes: meta.GrantTypes, ResponseTypes: []string{"code"}, ApplicationType: meta.ApplicationType}
	if len(out.GrantTypes) == 0 {
		out.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	now := s.cfg.Clock.Now()
	c := store.OAuthClient{ID: newID("hc_"), Name: out.ClientName, RedirectURIs: out.RedirectURIs, CreatedAt: now}
	if err := s.cfg.Store.CreateOAuthClient(ctx, c); err != nil {
		return Registered{}, err
	}
	return Registered{ID: c.ID, IssuedAt: now, Metadata: out}, nil
}

// checkRegistration checks what a registration asks for besides its redirect URIs: the
// application type (OpenID Connect Registration §2, which the 2026-07-28 revision asks for),
// grant types and response types hangar offers.
func checkRegistration(meta oauthex.ClientRegistrationMetadata) *Error {
	switch meta.ApplicationType {
	case "", "native":
	case "web":
		for _, u := range meta.RedirectURIs {
			if !strings.HasPrefix(u, "https://") {
				return &Error{Code: "invalid_redirect_uri",
					Description: "A web application's redirect URIs must be https (a native application's may be http on a loopback address)."}
			}
		}
	default:
		return badRequest("invalid_client_metadata", "application_type must be web or native.")
	}
	for _, g := range meta.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return badRequest("invalid_client_metadata", "A grant type asked for is not offered; hangar offers authorization_code and refresh_token.")
		}
	}
	for _, t := range meta.ResponseTypes {
		if t != "code" {
			return badRequest("invalid_client_metadata", "A response type asked for is not offered; hangar offers code.")
		}
	}
	return nil
}
