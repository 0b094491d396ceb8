package oauth

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/store"
)

// authRequest is a checked authorization request (RFC 6749 §4.1.1 with PKCE and RFC 8707).
type authRequest struct {
	client      client
	redirectURI string
	redirectSet bool // the request named redirect_uri (then the token request must too, RFC 6749 §4.1.3)
	state       string
	challenge   string   // PKCE S256 code challenge
	scopes      []string // the grantable scopes asked for; always holds mcp
	resource    string
}

// pageError is a failure shown on hangar's own page, never sent to the redirect URI: the
// client or its redirect URI cannot be trusted (RFC 6749 §4.1.2.1), or the consent form was
// forged.
type pageError struct {
	status  int
	message string
}

// pkceChallenge is an S256 code challenge: base64url of 32 bytes (RFC 7636 §4.2).
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// authParams are the parameters of an authorization request, each allowed once.
var authParams = []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "resource"}

// parseAuthRequest checks an authorization request's parameters. A *pageError means the
// client or its redirect URI cannot be trusted; an *oauthError is any other bad request. Both
// are shown on hangar's own page (see requestError).
func (s *Server) parseAuthRequest(ctx context.Context, q url.Values) (authRequest, *pageError, *oauthError) {
	for _, k := range authParams {
		if len(q[k]) > 1 {
			return authRequest{}, &pageError{http.StatusBadRequest, fmt.Sprintf("The parameter %s is given more than once.", k)}, nil
		}
	}
	c, err := s.lookupClient(ctx, q.Get("client_id"))
	if err != nil {
		var oe *oauthError
		if !errors.As(err, &oe) {
			s.log.Error("look up oauth client", "err", err)
			return authRequest{}, &pageError{http.StatusInternalServerError, somethingWrong}, nil
		}
		return authRequest{}, &pageError{http.StatusBadRequest, "This application cannot sign in to hangar: " + oe.Description}, nil
	}
	ar := authRequest{client: c, redirectURI: q.Get("redirect_uri"), redirectSet: q.Get("redirect_uri") != "", state: q.Get("state")}
	switch {
	case ar.redirectURI == "" && len(c.RedirectURIs) == 1:
		ar.redirectURI = c.RedirectURIs[0]
	case !slices.Contains(c.RedirectURIs, ar.redirectURI): // exact match only: no open redirect
		return authRequest{}, &pageError{http.StatusBadRequest, fmt.Sprintf("The redirect URI %q is not one %s registered, so hangar will not send you there.", ar.redirectURI, c.Name)}, nil
	}
	switch {
	case q.Get("response_type") != "code":
		return ar, nil, badRequest("unsupported_response_type", "response_type must be code.")
	case q.Get("code_challenge") == "":
		return ar, nil, badRequest("invalid_request", "code_challenge is missing: hangar requires PKCE (S256).")
	case q.Get("code_challenge_method") != "S256":
		return ar, nil, badRequest("invalid_request", "code_challenge_method must be S256 (plain is not accepted).")
	case !pkceChallenge.MatchString(q.Get("code_challenge")):
		return ar, nil, badRequest("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters).")
	}
	ar.challenge = q.Get("code_challenge")
	ar.resource = q.Get("resource")
	if ar.resource == "" {
		ar.resource = s.Resource()
	} else if ar.resource != s.Resource() {
		return ar, nil, badRequest("invalid_target", "The resource is not this server's; it is %s.", s.Resource())
	}
	scopes, oe := requestedScopes(q.Get("scope"))
	if oe != nil {
		return ar, nil, oe
	}
	ar.scopes = scopes
	return ar, nil, nil
}

// requestedScopes parses a scope parameter: grantable scopes and offline_access; none means
// mcp. mcp is always in the result, first.
func requestedScopes(param string) ([]string, *oauthError) {
	out := []string{string(auth.ScopeMCP)}
	for _, sc := range strings.Fields(param) {
		switch {
		case sc == offlineAccess:
		case !slices.Contains(grantableScopes, sc):
			return nil, badRequest("invalid_scope", "A scope asked for is not offered; hangar offers %s (and offline_access).", strings.Join(grantableScopes, ", "))
		case !slices.Contains(out, sc):
			out = append(out, sc)
		}
	}
	return out, nil
}

// requestError shows a bad authorization request (an *oauthError of parseAuthRequest) on
// hangar's own page rather than at the client's redirect URI. Every client of hangar registers
// itself (RFC 7591, open to anyone) or publishes its own metadata document, so its redirect URI
// proves nothing about it: sending errors there unasked would make hangar an open redirector
// (RFC 9700 §4.11.2). The person is sent to the redirect URI only after acting on the consent
// page (allow, or deny).
func (s *Server) requestError(w http.ResponseWriter, ar authRequest, oe *oauthError) {
	s.renderError(w, &pageError{http.StatusBadRequest, fmt.Sprintf("The request of the application %s is not valid (%s): %s Tell its makers; hangar does not send you back to it.", ar.client.Name, oe.Code, oe.Description)})
}

// redirectError sends an error back to the client (RFC 6749 §4.1.2.1, with RFC 9207's iss).
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, ar authRequest, oe *oauthError) {
	v := url.Values{"error": {oe.Code}, "error_description": {nqschar(oe.Description)}}
	s.redirect(w, r, ar, v)
}

func (s *Server) redirect(w http.ResponseWriter, r *http.Request, ar authRequest, v url.Values) {
	if ar.state != "" {
		v.Set("state", ar.state)
	}
	v.Set("iss", s.cfg.Issuer)
	u, _ := url.Parse(ar.redirectURI) // checked at registration
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// authorizePage is GET /oauth/authorize: the consent page.
func (s *Server) authorizePage(w http.ResponseWriter, r *http.Request) {
	ar, pe, oe := s.parseAuthRequest(r.Context(), r.URL.Query())
	switch {
	case pe != nil:
		s.renderError(w, pe)
	case oe != nil:
		s.requestError(w, ar, oe)
	default:
		// One value per browser, kept while it is there, so that two consent pages open at
		// once (two clients, two tabs) both work.
		csrf := newSecret("")
		if ck, err := r.Cookie(s.csrfCookieName()); err == nil && csrfValue.MatchString(ck.Value) {
			csrf = ck.Value
		}
		http.SetCookie(w, s.csrfCookie(csrf))
		s.renderConsent(w, http.StatusOK, ar, csrf, consentForm{Scopes: ar.scopes}, "")
	}
}

// csrfCookieName is the consent form's double-submit cookie; on https the __Host- prefix pins
// it to hangar's origin.
func (s *Server) csrfCookieName() string {
	if strings.HasPrefix(s.cfg.Issuer, "https://") {
		return "__Host-hangar_consent"
	}
	return "hangar_consent"
}

// csrfValue is what newSecret("") makes: 32 bytes, base64url.
var csrfValue = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func (s *Server) csrfCookie(value string) *http.Cookie {
	return &http.Cookie{Name: s.csrfCookieName(), Value: value, Path: "/", HttpOnly: true,
		Secure: strings.HasPrefix(s.cfg.Issuer, "https://"), SameSite: http.SameSiteStrictMode, MaxAge: 600}
}

// consentForm is what the person entered.
type consentForm struct {
	Scopes  []string // the scopes ticked
	Sandbox string
}

// consent is POST /oauth/authorize: the consent form. It is refused unless it comes from
// hangar's own page (the CSRF cookie matches the form's field, and an Origin header, if any,
// is hangar's); then the person is signed in with their token, and what they chose becomes
// a grant and its code.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	if ok, why := s.allowed(w, r, s.cfg.ConsentLimit); !ok {
		s.renderError(w, &pageError{http.StatusTooManyRequests, why})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.renderError(w, &pageError{http.StatusRequestTimeout, bodyTimeout.Description})
			return
		}
		s.renderError(w, &pageError{http.StatusBadRequest, "The form could not be read."})
		return
	}
	if !s.sameOrigin(r) {
		s.renderError(w, &pageError{http.StatusForbidden, "This form was not sent from hangar's consent page, so it is refused. Start again from the application."})
		return
	}
	ar, pe, oe := s.parseAuthRequest(r.Context(), r.PostForm)
	switch {
	case pe != nil:
		s.renderError(w, pe)
		return
	case oe != nil:
		s.requestError(w, ar, oe)
		return
	}
	if r.PostForm.Get("action") != "allow" {
		s.redirectError(w, r, ar, &oauthError{Code: "access_denied", Description: "The person declined."})
		return
	}
	form := consentForm{Scopes: r.PostForm["grant_scope"], Sandbox: strings.TrimSpace(r.PostForm.Get("sandbox"))}
	csrf := r.PostForm.Get("csrf")
	g, problem := s.decide(r.Context(), ar, r.PostForm.Get("token"), form)
	if problem != "" {
		s.renderConsent(w, http.StatusBadRequest, ar, csrf, form, problem)
		return
	}
	code := newSecret("hgc_")
	redirectURI := ar.redirectURI // what the token request must repeat: "" when the request named none
	if !ar.redirectSet {
		redirectURI = ""
	}
	c := store.OAuthCode{Hash: hash(code), RedirectURI: redirectURI, CodeChallenge: ar.challenge, ExpiresAt: s.cfg.Now().Add(s.cfg.CodeTTL)}
	err := s.cfg.Store.CreateOAuthGrantWithin(r.Context(), g, c, s.cfg.Auth.MaxPerUser(), s.cfg.Now())
	if errors.Is(err, store.ErrLimit) {
		s.renderConsent(w, http.StatusConflict, ar, csrf, form, "hangar cannot grant that: "+s.cfg.Auth.LimitFor(g.User).Error()+".")
		return
	}
	if err != nil {
		s.log.Error("store oauth grant", "err", err)
		s.renderError(w, &pageError{http.StatusInternalServerError, somethingWrong})
		return
	}
	// Each new grant sweeps the codes and refresh tokens that have expired, so that they do not
	// pile up (no timer needed: nothing expired matters until someone asks).
	if _, err := s.cfg.Store.DeleteExpiredOAuth(r.Context(), s.cfg.Now()); err != nil {
		s.log.Warn("delete expired oauth codes and refresh tokens", "err", err)
	}
	s.redirect(w, r, ar, url.Values{"code": {code}})
}

// sameOrigin is the consent form's CSRF check: the cookie set with the page equals the form's
// csrf field, and the request's Origin, when the browser sends one, is hangar's.
func (s *Server) sameOrigin(r *http.Request) bool {
	ck, err := r.Cookie(s.csrfCookieName())
	field := r.PostForm.Get("csrf")
	if err != nil || ck.Value == "" || field == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(field)) != 1 {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || origin == s.cfg.Issuer
}

// somethingWrong is what the person is told of a failure inside hangar (its cause is logged).
const somethingWrong = "Something went wrong inside hangar; the server log has the details."

// decide signs the person in with their token and checks what they chose: the grant to make,
// or a sentence for the page saying what is wrong.
func (s *Server) decide(ctx context.Context, ar authRequest, token string, form consentForm) (store.OAuthGrant, string) {
	p, err := s.cfg.Auth.Authenticate(ctx, strings.TrimSpace(token))
	switch {
	case errors.Is(err, auth.ErrNoToken) || auth.Dead(err):
		return store.OAuthGrant{}, "That token is not valid (" + err.Error() + "). Paste a hangar token of yours with the user scope."
	case err != nil:
		s.log.Error("sign in on the consent page", "err", err)
		return store.OAuthGrant{}, somethingWrong
	}
	if !slices.Contains(form.Scopes, string(auth.ScopeMCP)) {
		return store.OAuthGrant{}, "The mcp scope is needed: without it the application cannot use /mcp."
	}
	var scopes []auth.Scope
	for _, sc := range form.Scopes {
		if !slices.Contains(ar.scopes, sc) {
			return store.OAuthGrant{}, fmt.Sprintf("The scope %q was not asked for by the application.", sc)
		}
		scopes = append(scopes, auth.Scope(sc))
	}
	// A dry run of the first access token: the same rules as any token made by this one (its
	// scopes, binding and expiry), so a refusal shows here rather than at the token endpoint.
	_, t, err := s.cfg.Auth.PrepareToken(ctx, p, auth.NewToken{Scopes: scopes, Sandbox: form.Sandbox, ExpiresAt: accessExpiry(s.cfg.Now(), time.Minute, p)})
	switch {
	case errors.Is(err, auth.ErrForbidden) || errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNoSandbox):
		return store.OAuthGrant{}, "hangar cannot grant that: " + err.Error() + "."
	case err != nil:
		s.log.Error("check the grant on the consent page", "err", err)
		return store.OAuthGrant{}, somethingWrong
	}
	return store.OAuthGrant{ID: newID("gr_"), ClientID: ar.client.ID, ClientName: ar.client.Name, User: t.User, Scopes: t.Scopes,
		Sandbox: t.Sandbox, Resource: ar.resource, ConsentToken: p.TokenID, CreatedAt: s.cfg.Now()}, ""
}

//go:embed consent.html
var consentHTML string

var consentPage = template.Must(template.New("consent").Parse(consentHTML))

// pageData is what consent.html shows.
type pageData struct {
	Nonce       string // the CSP nonce of the page's one style element
	Error       string
	Client      string
	ClientID    string
	RedirectTo  string // the redirect URI's origin
	Fields      map[string]string
	Scopes      []scopeChoice
	Sandbox     string
	ShowConsent bool
	// OnThisMachine warns that the redirect goes to a loopback address while the client is
	// known by a metadata document URL: any program on the person's machine could use that
	// client id (draft-ietf-oauth-client-id-metadata-document, security considerations).
	OnThisMachine bool
}

type scopeChoice struct {
	Name, About string
	Checked     bool
}

var scopeAbout = map[string]string{
	"mcp":  "use hangar's MCP endpoint as you: run commands in your sandboxes, start processes, sessions and agent jobs",
	"jobs": "hangar's jobs scope (start, watch and cancel agent jobs); it adds nothing to mcp, since the access token is good only at /mcp",
}

func (s *Server) renderConsent(w http.ResponseWriter, status int, ar authRequest, csrf string, form consentForm, problem string) {
	d := pageData{Error: problem, Client: ar.client.Name, ClientID: ar.client.ID, RedirectTo: origin(ar.redirectURI), Sandbox: form.Sandbox, ShowConsent: true,
		Fields: map[string]string{"response_type": "code", "client_id": ar.client.ID, "state": ar.state,
			"code_challenge": ar.challenge, "code_challenge_method": "S256", "scope": strings.Join(ar.scopes, " "), "resource": ar.resource, "csrf": csrf}}
	if ar.redirectSet {
		d.Fields["redirect_uri"] = ar.redirectURI
	}
	if u, err := url.Parse(ar.redirectURI); err == nil && isLoopback(u.Hostname()) && strings.HasPrefix(ar.client.ID, "https://") {
		d.OnThisMachine = true
	}
	for _, sc := range ar.scopes {
		d.Scopes = append(d.Scopes, scopeChoice{Name: sc, About: scopeAbout[sc], Checked: slices.Contains(form.Scopes, sc)})
	}
	s.render(w, status, d, "'self' "+d.RedirectTo)
}

func (s *Server) renderError(w http.ResponseWriter, pe *pageError) {
	s.render(w, pe.status, pageData{Error: pe.message}, "'none'")
}

// render writes the page with a strict Content-Security-Policy: nothing loads from anywhere
// (no scripts at all), the one style element has a nonce, the page cannot be framed, and the
// form may be sent only to hangar and be redirected only to the client's redirect origin.
func (s *Server) render(w http.ResponseWriter, status int, d pageData, formAction string) {
	d.Nonce = newSecret("")
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+d.Nonce+"'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := consentPage.Execute(w, d); err != nil {
		s.log.Warn("write consent page", "err", err)
	}
}

// origin is scheme://host of a URL.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
