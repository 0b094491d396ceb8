package e2bapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/quartz"
	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/jsoncheck"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
)

// EnvdVersion is the envd version the API says its sandboxes run: the newest the E2B SDK (2.51.0)
// tells apart (it picks how to call the daemon by it), whose calls hangar-envd answers, as E2B's
// SDK suite against hangar-envd (scripts/e2bcompat, where the SDK assumes the newest) shows.
const EnvdVersion = "0.6.4"

// clientID is what the API answers as a sandbox's clientID: E2B's node id, which hangar has no
// equivalent of; the SDK does not read it.
const clientID = "hangar"

// Config configures the E2B API handler.
type Config struct {
	// Auth checks the API keys (hangar tokens). Required.
	Auth *auth.Authenticator
	// Sandboxes makes and keeps the sandboxes. Required.
	Sandboxes *sandbox.Manager
	// Grants mints the sandboxes' envdAccessTokens. Required.
	Grants Grants
	// Templates maps E2B template ids to providers and images. Default: base only (the
	// server's default provider).
	Templates Templates
	// Clock tells when a sandbox's timeout ends. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// api holds what the handlers share.
type api struct {
	Config
	log *slog.Logger
}

// New returns the E2B API's routes, to be mounted at /e2b (E2B_API_URL=<hangar>/e2b).
func New(cfg Config) http.Handler {
	if cfg.Templates == nil {
		cfg.Templates = Templates{DefaultTemplate: {}}
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &api{Config: cfg, log: cfg.Logger}
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, problem.New(problem.CodeNotFound, "There is nothing at "+r.URL.Path+" in hangar's E2B API.", nil))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, problem.New(problem.CodeMethod, r.Method+" is not allowed on "+r.URL.Path+" in hangar's E2B API.", nil))
	})
	r.Group(func(r chi.Router) {
		r.Use(a.authenticate)
		r.Post("/v2/sandboxes", a.create)
		r.Get("/v2/sandboxes", a.list)
		r.Post("/v2/sandboxes/{id}/connect", a.connect)
		r.Get("/sandboxes/{id}", a.info)
		r.Delete("/sandboxes/{id}", a.kill)
		r.Post("/sandboxes/{id}/timeout", a.setTimeout)
		r.Post("/sandboxes/{id}/pause", a.pause)
		r.Get("/sandboxes/{id}/metrics", a.metrics)
		a.notOffered(r)
	})
	return r
}

// errorBody is E2B's error shape: the status again as code, and a sentence. The SDK raises its
// error types from the status (401 AuthenticationError, 404 NotFoundError, 429 RateLimitError)
// and shows the message.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers err in E2B's shape, with the status of its code in hangar's problem table.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return // nobody is left to answer
	}
	p := problem.Of(err)
	if p.Code == problem.CodeInternal {
		a.log.Error("e2b api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	msg := p.Message
	if p.Detail != "" && p.Code != problem.CodeInternal && p.Code != problem.CodeUnavailable {
		msg += " (" + p.Detail + ")"
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(p.RetryAfter.Seconds())))
	}
	status := p.Code.Status()
	if status == http.StatusNotImplemented || errors.Is(err, errNotOffered) {
		status = http.StatusNotImplemented
	}
	writeJSON(w, status, errorBody{Code: status, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing to do about it
}

// authenticate takes the API key (X-API-Key, as the SDK sends E2B_API_KEY; or a bearer token)
// as a hangar token with the user scope, and puts its principal in the request's context.
func (a *api) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := strings.TrimSpace(r.Header.Get("X-API-Key"))
		if secret == "" {
			if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
				secret = strings.TrimSpace(token)
			}
		}
		if secret == "" {
			a.writeError(w, r, problem.New(problem.CodeUnauthorized, "No API key: set E2B_API_KEY to a hangar token (the SDK sends it as X-API-Key).", nil))
			return
		}
		p, err := a.Auth.Authenticate(r.Context(), secret)
		if err == nil && p.Audience != "" {
			err = auth.ErrAudience // an OAuth access token is for /mcp only
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if !p.Has(auth.ScopeUser) {
			a.writeError(w, r, problem.New(problem.CodeForbidden, "This token lacks the user scope the E2B API needs.", nil))
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

func principal(r *http.Request) auth.Principal {
	p, _ := auth.PrincipalFrom(r.Context()) // always there: authenticate put it
	return p
}

// decode reads a JSON request body into v. Fields hangar does not know are let through (the SDK
// sends some it has nothing to do with, as null); those it cannot honour are refused by each
// handler. An empty body is an empty object, as E2B takes it.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return problem.New(problem.CodeTooLarge, "The request body is too large.", err)
		}
		if errors.Is(err, problem.ErrBodyTimeout) {
			return err
		}
		return problem.New(problem.CodeBadRequest, "The request body could not be read.", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if at := jsoncheck.InvalidUTF8At(body); at >= 0 {
		return problem.New(problem.CodeBadRequest, "The request body is not valid UTF-8.", fmt.Errorf("invalid UTF-8 at byte %d", at))
	}
	if at := jsoncheck.LoneSurrogateAt(body); at >= 0 {
		return problem.New(problem.CodeBadRequest, `The request body has a \u escape that is half of a UTF-16 surrogate pair, which is no character.`,
			fmt.Errorf("lone surrogate escape at byte %d", at))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return problem.New(problem.CodeBadRequest, "The request body is not the JSON this endpoint takes.", err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return problem.New(problem.CodeBadRequest, "The request body has something after its JSON value; send exactly one JSON object.", nil)
	}
	return nil
}
