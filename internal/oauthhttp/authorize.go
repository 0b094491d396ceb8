package oauthhttp

import (
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

	"github.com/hangar-dev/hangar/internal/oauth"
)

// pageError is a failure shown on hangar's own page, never sent to the redirect URI: the
// client or its redirect URI cannot be trusted (RFC 6749 §4.1.2.1), or the consent form was
// forged.
type pageError struct {
	status  int
	message string
}

// parseAuthRequest is oauth.Server.ParseAuthRequest, with what to show when it fails: a
// *pageError, or an *oauth.Error of a request whose client is known (see requestError).
func (h *Handler) parseAuthRequest(r *http.Request, q url.Values) (oauth.AuthRequest, *pageError, *oauth.Error) {
	ar, err := h.s.ParseAuthRequest(r.Context(), q)
	var (
		re *oauth.RefusedError
		oe *oauth.Error
	)
	switch {
	case err == nil:
		return ar, nil, nil
	case errors.As(err, &re):
		return ar, &pageError{http.StatusBadRequest, re.Message}, nil
	case errors.As(err, &oe):
		return ar, nil, oe
	}
	h.log.Error("look up oauth client", "err", err)
	return ar, &pageError{http.StatusInternalServerError, oauth.SomethingWrong}, nil
}

// requestError shows a bad authorization request on hangar's own page rather than at the
// client's redirect URI. Every client of hangar registers itself (RFC 7591, open to anyone) or
// publishes its own metadata document, so its redirect URI proves nothing about it: sending
// errors there unasked would make hangar an open redirector (RFC 9700 §4.11.2). The person is
// sent to the redirect URI only after acting on the consent page (allow, or deny).
func (h *Handler) requestError(w http.ResponseWriter, ar oauth.AuthRequest, oe *oauth.Error) {
	h.renderError(w, &pageError{http.StatusBadRequest, fmt.Sprintf("The request of the application %s is not valid (%s): %s Tell its makers; hangar does not send you back to it.", ar.Client.Name, oe.Code, oe.Description)})
}

func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, ar oauth.AuthRequest, v url.Values) {
	if ar.State != "" {
		v.Set("state", ar.State)
	}
	v.Set("iss", h.s.Issuer())
	u, _ := url.Parse(ar.RedirectURI) // checked at registration
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// authorizePage is GET /oauth/authorize: the consent page.
func (h *Handler) authorizePage(w http.ResponseWriter, r *http.Request) {
	ar, pe, oe := h.parseAuthRequest(r, r.URL.Query())
	switch {
	case pe != nil:
		h.renderError(w, pe)
	case oe != nil:
		h.requestError(w, ar, oe)
	default:
		// One value per browser, kept while it is there, so that two consent pages open at
		// once (two clients, two tabs) both work.
		csrf := oauth.NewSecret("")
		if ck, err := r.Cookie(h.csrfCookieName()); err == nil && csrfValue.MatchString(ck.Value) {
			csrf = ck.Value
		}
		http.SetCookie(w, h.csrfCookie(csrf))
		h.renderConsent(w, http.StatusOK, ar, csrf, oauth.Choice{Scopes: ar.Scopes}, "")
	}
}

// csrfCookieName is the consent form's double-submit cookie; on https the __Host- prefix pins
// it to hangar's origin.
func (h *Handler) csrfCookieName() string {
	if strings.HasPrefix(h.s.Issuer(), "https://") {
		return "__Host-hangar_consent"
	}
	return "hangar_consent"
}

// csrfValue is what oauth.NewSecret("") makes: 32 bytes, base64url.
var csrfValue = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func (h *Handler) csrfCookie(value string) *http.Cookie {
	return &http.Cookie{Name: h.csrfCookieName(), Value: value, Path: "/", HttpOnly: true,
		Secure: strings.HasPrefix(h.s.Issuer(), "https://"), SameSite: http.SameSiteStrictMode, MaxAge: 600}
}

// consent is POST /oauth/authorize: the consent form. It is refused unless it comes from
// hangar's own page (the CSRF cookie matches the form's field, and an Origin header, if any,
// is hangar's); then the person is signed in with their token, and what they chose becomes
// a grant and its code (oauth.Server.Consent).
func (h *Handler) consent(w http.ResponseWriter, r *http.Request) {
	if ok, why := h.allowed(w, r, h.cfg.ConsentLimit); !ok {
		h.renderError(w, &pageError{http.StatusTooManyRequests, why})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			h.renderError(w, &pageError{http.StatusRequestTimeout, bodyTimeout.Description})
			return
		}
		h.renderError(w, &pageError{http.StatusBadRequest, "The form could not be read."})
		return
	}
	if !h.sameOrigin(r) {
		h.renderError(w, &pageError{http.StatusForbidden, "This form was not sent from hangar's consent page, so it is refused. Start again from the application."})
		return
	}
	ar, pe, oe := h.parseAuthRequest(r, r.PostForm)
	switch {
	case pe != nil:
		h.renderError(w, pe)
		return
	case oe != nil:
		h.requestError(w, ar, oe)
		return
	}
	if r.PostForm.Get("action") != "allow" {
		// RFC 6749 §4.1.2.1, with RFC 9207's iss.
		h.redirect(w, r, ar, url.Values{"error": {"access_denied"}, "error_description": {"The person declined."}})
		return
	}
	choice := oauth.Choice{Scopes: r.PostForm["grant_scope"], Sandbox: strings.TrimSpace(r.PostForm.Get("sandbox"))}
	code, err := h.s.Consent(r.Context(), ar, r.PostForm.Get("token"), choice)
	var ce *oauth.ConsentError
	switch {
	case errors.As(err, &ce) && ce.Limit:
		h.renderConsent(w, http.StatusConflict, ar, r.PostForm.Get("csrf"), choice, ce.Message)
	case errors.As(err, &ce):
		h.renderConsent(w, http.StatusBadRequest, ar, r.PostForm.Get("csrf"), choice, ce.Message)
	case err != nil:
		h.log.Error("oauth consent", "err", err)
		h.renderError(w, &pageError{http.StatusInternalServerError, oauth.SomethingWrong})
	default:
		h.redirect(w, r, ar, url.Values{"code": {code}})
	}
}

// sameOrigin is the consent form's CSRF check: the cookie set with the page equals the form's
// csrf field, and the request's Origin, when the browser sends one, is hangar's.
func (h *Handler) sameOrigin(r *http.Request) bool {
	ck, err := r.Cookie(h.csrfCookieName())
	field := r.PostForm.Get("csrf")
	if err != nil || ck.Value == "" || field == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(field)) != 1 {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || origin == h.s.Issuer()
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
	// OnThisMachine warns that any program on the person's machine could use the client id
	// (oauth.AuthRequest.OnThisMachine).
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

func (h *Handler) renderConsent(w http.ResponseWriter, status int, ar oauth.AuthRequest, csrf string, choice oauth.Choice, problem string) {
	d := pageData{Error: problem, Client: ar.Client.Name, ClientID: ar.Client.ID, RedirectTo: origin(ar.RedirectURI), Sandbox: choice.Sandbox, ShowConsent: true,
		OnThisMachine: ar.OnThisMachine(),
		Fields: map[string]string{"response_type": "code", "client_id": ar.Client.ID, "state": ar.State,
			"code_challenge": ar.Challenge, "code_challenge_method": "S256", "scope": strings.Join(ar.Scopes, " "), "resource": ar.Resource, "csrf": csrf}}
	if ar.RedirectSet {
		d.Fields["redirect_uri"] = ar.RedirectURI
	}
	for _, sc := range ar.Scopes {
		d.Scopes = append(d.Scopes, scopeChoice{Name: sc, About: scopeAbout[sc], Checked: slices.Contains(choice.Scopes, sc)})
	}
	h.render(w, status, d, "'self' "+d.RedirectTo)
}

func (h *Handler) renderError(w http.ResponseWriter, pe *pageError) {
	h.render(w, pe.status, pageData{Error: pe.message}, "'none'")
}

// render writes the page with a strict Content-Security-Policy: nothing loads from anywhere
// (no scripts at all), the one style element has a nonce, the page cannot be framed, and the
// form may be sent only to hangar and be redirected only to the client's redirect origin.
func (h *Handler) render(w http.ResponseWriter, status int, d pageData, formAction string) {
	d.Nonce = oauth.NewSecret("")
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+d.Nonce+"'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := consentPage.Execute(w, d); err != nil {
		h.log.Warn("write consent page", "err", err)
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
