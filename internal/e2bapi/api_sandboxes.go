package e2bapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/stamp"
	"github.com/hangar-dev/hangar/internal/store"
)

// defaultTimeout is a new sandbox's timeout when the request gives none: E2B's API's (the SDK
// always sends one, 300 s unless told otherwise).
const defaultTimeout = 15 * time.Second

// newSandbox is POST /v2/sandboxes's body (E2B's NewSandbox).
type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"` // seconds
	AutoPause  bool              `json:"autoPause"`
	Secure     *bool             `json:"secure"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	// What hangar cannot honour: refused when asked for, rather than ignored.
	AllowInternetAccess *bool           `json:"allow_internet_access"`
	Network             *map[string]any `json:"network"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	VolumeMounts []any `json:"volumeMounts"`
	MCP          any   `json:"mcp"`
}

// created is the answer to a create or a connect (E2B's Sandbox).
type created struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	ClientID        string `json:"clientID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken"`
	// Domain is null: the SDK then reaches the daemon at E2B_SANDBOX_URL.
	Domain *string `json:"domain"`
}

// listed is a sandbox in a list (E2B's ListedSandbox); detail adds what GET /sandboxes/{id}
// says (E2B's SandboxDetail). E2B's cpuCount, memoryMB and diskSizeMB are left out: hangar's
// providers do not all say them.
type listed struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	StartedAt   *stamp.Time       `json:"startedAt"`
	EndAt       *stamp.Time       `json:"endAt,omitempty"` // absent: the sandbox has no timeout
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
}

type detail struct {
	listed
	EnvdAccessToken string    `json:"envdAccessToken"`
	Domain          *string   `json:"domain"`
	Lifecycle       lifecycle `json:"lifecycle"`
}

type lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

func toListed(sb sandbox.Sandbox) listed {
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return listed{SandboxID: SandboxID(sb.Name), TemplateID: templateOf(sb), ClientID: clientID, StartedAt: stamp.Of(sb.CreatedAt),
		EndAt: stamp.Of(sb.EndAt), State: sb.State, EnvdVersion: EnvdVersion, Metadata: meta}
}

// templateOf is the template id a sandbox answers with: the one it was made from through this
// API, else (a sandbox made through hangar's own API) its image, else base.
func templateOf(sb sandbox.Sandbox) string {
	switch {
	case sb.Template != "":
		return sb.Template
	case sb.Image != "":
		return sb.Image
	}
	return DefaultTemplate
}

// errNotOffered marks what hangar's E2B API does not do: E2B's 501.
var errNotOffered = errors.New("not offered")

func notOffered(what string) error {
	return fmt.Errorf("%w: %w", errNotOffered, problem.New(problem.CodeBadRequest, what, nil))
}

// seconds reads an E2B timeout (whole seconds) as a duration within hangar's bound.
func seconds(n int64) (time.Duration, error) {
	if n < 0 || n > int64(sandbox.MaxTimeout/time.Second) {
		return 0, problem.New(problem.CodeBadRequest, fmt.Sprintf("The timeout must be between 0 and %d seconds, not %d.", int64(sandbox.MaxTimeout/time.Second), n), nil)
	}
	return time.Duration(n) * time.Second, nil
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := decode(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := req.check(); err != nil {
		a.writeError(w, r, err)
		return
	}
	if req.TemplateID == "" {
		req.TemplateID = DefaultTemplate
	}
	tpl, err := a.Templates.lookup(req.TemplateID)
	if err != nil {
		a.writeError(w, r, problem.New(problem.CodeNotFound, problem.Sentence(err.Error()), nil))
		return
	}
	timeout := defaultTimeout
	if req.Timeout != nil {
		if timeout, err = seconds(*req.Timeout); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	if timeout == 0 {
		a.writeError(w, r, problem.New(problem.CodeBadRequest, "The timeout must be at least 1 second.", nil))
		return
	}
	onTimeout := store.OnTimeoutKill
	if req.AutoPause {
		onTimeout = store.OnTimeoutPause
	}
	// The template id is kept as the sandbox's template (the docker, kubernetes and local
	// providers take none of their own), so the sandbox answers with it; an e2b template keeps
	// E2B's name. The default base keeps none: on the e2b provider that is its own default
	// (HANGAR_E2B_TEMPLATE), and a sandbox with neither template nor image answers base.
	template := req.TemplateID
	switch {
	case tpl.Provider == "e2b":
		template = tpl.E2B
	case tpl == (Template{}):
		template = ""
	}
	p := principal(r)
	sb, err := a.Sandboxes.Create(r.Context(), p, sandbox.CreateRequest{
		Name: ids.New("e2b-", 16), Provider: tpl.Provider, Image: tpl.Image, Template: template, Env: req.EnvVars,
		Metadata: req.Metadata, Timeout: timeout, OnTimeout: onTimeout,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.answerSandbox(w, r, http.StatusCreated, sb)
}

// check refuses what hangar's sandboxes cannot do, with a sentence, rather than make a sandbox
// that does not do what its maker asked.
func (req newSandbox) check() error {
	switch {
	case req.AllowInternetAccess != nil && !*req.AllowInternetAccess:
		return notOffered("hangar cannot cut a sandbox off the internet through its E2B API (allowInternetAccess: false); leave it out.")
	case req.Network != nil && len(*req.Network) > 0:
		return notOffered("hangar does not offer E2B's network rules (network); leave them out.")
	case req.AutoResume != nil && req.AutoResume.Enabled:
		return notOffered("hangar does not resume a paused sandbox on traffic (autoResume); resume it with Sandbox.connect.")
	case len(req.VolumeMounts) > 0:
		return notOffered("hangar does not offer E2B's volumes (volumeMounts).")
	case req.MCP != nil:
		return notOffered("hangar does not offer E2B's MCP gateway (mcp).")
	}
	return nil
}

// answerSandbox answers a sandbox made or connected to, with an access token for its daemon.
func (a *api) answerSandbox(w http.ResponseWriter, r *http.Request, status int, sb sandbox.Sandbox) {
	token, err := a.Grants.Mint(r.Context(), principal(r), sb.Name)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, status, created{SandboxID: SandboxID(sb.Name), TemplateID: templateOf(sb), ClientID: clientID,
		EnvdVersion: EnvdVersion, EnvdAccessToken: token})
}

// sandbox returns the sandbox the path's id names if the caller may see it and it is alive (E2B
// knows running and paused sandboxes only: one destroyed, failed or still being made is not
// found, as E2B answers).
func (a *api) sandbox(r *http.Request) (sandbox.Sandbox, error) {
	id := chi.URLParam(r, "id")
	name, ok := SandboxName(id)
	if !ok {
		return sandbox.Sandbox{}, problem.New(problem.CodeNotFound, fmt.Sprintf("There is no sandbox %.70q.", id), nil)
	}
	sb, err := a.Sandboxes.View(r.Context(), principal(r), name)
	if err != nil {
		return sb, err
	}
	if !alive(sb) {
		return sb, problem.New(problem.CodeNotFound, fmt.Sprintf("Sandbox %s is %s.", sb.Name, sb.State), nil)
	}
	return sb, nil
}

func alive(sb sandbox.Sandbox) bool { return sb.State == "running" || sb.State == "paused" }

func (a *api) info(w http.ResponseWriter, r *http.Request) {
	sb, err := a.sandbox(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	token, err := a.Grants.Mint(r.Context(), principal(r), sb.Name)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, detail{listed: toListed(sb), EnvdAccessToken: token,
		Lifecycle: lifecycle{OnTimeout: cmp.Or(sb.OnTimeout, store.OnTimeoutKill)}})
}

func (a *api) kill(w http.ResponseWriter, r *http.Request) {
	sb, err := a.sandbox(r)
	if err == nil {
		err = a.Sandboxes.Destroy(r.Context(), principal(r), sb.Name)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is POST /sandboxes/{id}/timeout's body and POST /v2/sandboxes/{id}/connect's.
type timeoutBody struct {
	Timeout *int64 `json:"timeout"` // seconds
}

func (a *api) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	if req.Timeout == nil {
		a.writeError(w, r, problem.New(problem.CodeBadRequest, `The request needs a timeout, in seconds from now: {"timeout": 300}.`, nil))
		return
	}
	d, err := seconds(*req.Timeout)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.sandbox(r)
	if err == nil {
		_, err = a.Sandboxes.SetEnd(r.Context(), principal(r), sb.Name, a.Clock.Now().Add(d))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect answers a sandbox to connect to, resuming it when paused. Its timeout is moved on to
// the request's from now when that is later (E2B never shortens a sandbox's time on connect).
func (a *api) connect(w http.ResponseWriter, r *http.Request) {
	var req timeoutBody
	if err := decode(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	var d time.Duration
	if req.Timeout != nil {
		var err error
		if d, err = seconds(*req.Timeout); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	p := principal(r)
	now := a.Clock.Now()
	sb, err := a.sandbox(r)
	switch {
	case err != nil:
	case sb.State == "paused":
		// Its time stood still while paused (pause cleared it): it starts again from now. A
		// sandbox made through hangar's own API has no timeout, and gets none.
		if sb, err = a.Sandboxes.Resume(r.Context(), p, sb.Name); err == nil && sb.OnTimeout != "" {
			if d == 0 {
				d = defaultTimeout
			}
			sb, err = a.Sandboxes.SetEnd(r.Context(), p, sb.Name, now.Add(d))
		}
	case d > 0 && !sb.EndAt.IsZero() && now.Add(d).After(sb.EndAt):
		sb, err = a.Sandboxes.SetEnd(r.Context(), p, sb.Name, now.Add(d))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.answerSandbox(w, r, http.StatusOK, sb)
}

func (a *api) pause(w http.ResponseWriter, r *http.Request) {
	sb, err := a.sandbox(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if sb.State == "paused" {
		a.writeError(w, r, problem.New(problem.CodeConflict, fmt.Sprintf("Sandbox %s is paused already.", sb.Name), nil))
		return
	}
	p := principal(r)
	if _, err := a.Sandboxes.Pause(r.Context(), p, sb.Name); err != nil {
		if errors.Is(err, provider.ErrUnsupported) {
			err = notOffered(fmt.Sprintf("Sandbox %s is on the %s provider, which cannot pause sandboxes.", sb.Name, sb.Provider))
		}
		a.writeError(w, r, err)
		return
	}
	// A paused sandbox's time stands still, as at E2B: connect resumes it with a new timeout.
	if _, err := a.Sandboxes.SetEnd(r.Context(), p, sb.Name, time.Time{}); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// metrics: hangar keeps no time series of a sandbox's CPU, memory and disk; E2B's 501 says so,
// once the sandbox is found (an unknown one is 404, as E2B answers).
func (a *api) metrics(w http.ResponseWriter, r *http.Request) {
	if _, err := a.sandbox(r); err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeError(w, r, notOffered("hangar keeps no CPU, memory or disk metrics of a sandbox for its E2B API; its own /metrics has the control plane's."))
}
