package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

// requireScope refuses tokens without the scope (admins have every scope).
func (a *api) requireScope(s auth.Scope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !principal(r).Has(s) {
				a.writeError(w, r, newError(CodeForbidden, "This token lacks the "+string(s)+" scope this needs.", nil))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (a *api) sandboxRoutes(r chi.Router) {
	r.Use(a.requireScope(auth.ScopeUser))
	r.Post("/", a.createSandbox)
	r.Get("/", a.listSandboxes)
	r.Route("/{ref}", func(r chi.Router) {
		r.Get("/", a.getSandbox)
		r.Delete("/", a.destroySandbox)
		r.Post("/pause", a.pauseSandbox)
		r.Post("/resume", a.resumeSandbox)
		r.Post("/exec", a.execSandbox)
		r.Post("/exec/stream", a.execStream)
		r.Route("/processes", a.processRoutes)
		if a.Watches != nil {
			r.Get("/watch", a.watchStream)
		}
	})
}

type createSandboxRequest struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Image    string            `json:"image"`
	Template string            `json:"template"`
	Workdir  string            `json:"workdir"`
	Env      map[string]string `json:"env"`
	Daemon   *bool             `json:"daemon"`
}

func (a *api) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createSandboxRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.Sandboxes.Create(r.Context(), principal(r), sandbox.CreateRequest{Name: req.Name, Provider: req.Provider, Image: req.Image,
		Template: req.Template, Workdir: req.Workdir, Env: req.Env, Daemon: req.Daemon})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, from.Sandbox(sb))
}

func (a *api) listSandboxes(w http.ResponseWriter, r *http.Request) {
	sbs, err := a.Sandboxes.List(r.Context(), principal(r), r.URL.Query().Get("all") == "true")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]wire.Sandbox, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, from.Sandbox(sb))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

func (a *api) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.Sandboxes.View(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.Sandbox(sb))
}

func (a *api) destroySandbox(w http.ResponseWriter, r *http.Request) {
	if err := a.Sandboxes.Destroy(r.Context(), principal(r), chi.URLParam(r, "ref")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.Sandboxes.Pause(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.Sandbox(sb))
}

func (a *api) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.Sandboxes.Resume(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.Sandbox(sb))
}

type execRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	Timeout float64           `json:"timeout"` // seconds; 0: none
}

func (a *api) execSandbox(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	ereq, err := req.toDomain()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.Sandboxes.Exec(r.Context(), principal(r), chi.URLParam(r, "ref"), ereq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, from.ExecResult(res, true, "", false)) // a plain exec waits for the end
}
