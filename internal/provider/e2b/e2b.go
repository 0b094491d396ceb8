// Package e2b is the provider that runs each sandbox as an E2B microVM, through E2B's REST API
// (create, get, list, kill, pause, connect to resume; X-API-Key). Every E2B sandbox runs E2B's
// own envd, which hangar's daemon client speaks to at https://49983-<sandboxID>.<domain> with the
// sandbox's envdAccessToken; E2B has no other way to run a command, so the provider's Exec
// returns provider.ErrUnsupported.
package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/provider"
)

// Name is the provider's name in the API.
const Name = "e2b"

// DaemonPort is the port E2B's envd listens on in a sandbox.
const DaemonPort = 49983

// Metadata keys hangar sets on its sandboxes; List finds them by metaInstance.
const (
	metaInstance = "hangar.instance"
	metaSandbox  = "hangar.sandbox"
	metaOwner    = "hangar.owner"
	metaWorkdir  = "hangar.workdir"
	metaHarness  = "hangar.harness" // where the harness was uploaded: HarnessPath
)

// HarnessPath is where a sandbox gets hangar (Config.HarnessBinary), run as `hangar harness`
// for its turns: root's, as on Docker, so a turn's agent cannot replace it.
const HarnessPath = "/opt/hangar/bin/hangar"

// Config configures the e2b provider.
type Config struct {
	// APIKey is the E2B API key, sent as X-API-Key. Required: New fails when it is empty.
	APIKey string
	// APIURL is the base URL of E2B's REST API. Empty: https://api.e2b.app.
	APIURL string
	// Domain is the sandboxes' base domain, used when E2B's answer names none. Empty: e2b.app.
	Domain string
	// DaemonURL is the pattern of a sandbox's envd URL: {sandboxID} and {domain} are replaced.
	// Empty: https://49983-{sandboxID}.{domain}.
	DaemonURL string
	// Template is the E2B template of a sandbox whose spec names none. Empty: base.
	Template string
	// Workdir is the workdir of a sandbox whose spec names none. Empty: /home/user.
	Workdir string
	// Timeout is how long a sandbox lives before E2B kills it (or pauses it, with AutoPause);
	// E2B caps it by plan. Zero: 1h.
	Timeout time.Duration
	// AutoPause makes E2B pause a sandbox at its timeout instead of killing it. False: killed.
	AutoPause bool
	// Instance tells this control plane's sandboxes apart from others' on the same E2B team
	// (metadata hangar.instance); List sees only its own. Empty: "default".
	Instance string
	// StartTimeout bounds how long Create and Resume wait for envd to answer /health. Zero: 60s.
	StartTimeout time.Duration
	// HTTPClient makes the API and health requests. Nil: a client with a 60s timeout.
	HTTPClient *http.Client
	// Logger receives the provider's log lines. Nil: discarded.
	Logger *slog.Logger
	// Clock times the wait for envd to answer. Nil: the real clock.
	Clock quartz.Clock
	// HarnessBinary is a file on this machine (a linux/amd64 hangar, as E2B's VMs run) that
	// Create uploads into each sandbox at HarnessPath, through envd's files API as root, for
	// its turns' harness (Data["harness"] then names it). Empty: none, and the sandboxes run no
	// turns.
	HarnessBinary string
	// HarnessPath is where in a sandbox HarnessBinary goes. Empty: HarnessPath.
	HarnessPath string
}

// Provider is the e2b provider. It is safe for concurrent use. Close it to release idle
// connections.
type Provider struct {
	cfg  Config
	http *http.Client
	log  *slog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New returns an e2b provider. It does not contact E2B.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("new e2b provider: no API key")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.e2b.app"
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if cfg.Domain == "" {
		cfg.Domain = "e2b.app"
	}
	if cfg.DaemonURL == "" {
		cfg.DaemonURL = "https://49983-{sandboxID}.{domain}"
	}
	if cfg.Template == "" {
		cfg.Template = "base"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/home/user"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Hour
	}
	if cfg.Instance == "" {
		cfg.Instance = "default"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HarnessPath == "" {
		cfg.HarnessPath = HarnessPath
	}
	return &Provider{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger.With("provider", Name)}, nil
}

// Close releases idle connections.
func (p *Provider) Close() { p.http.CloseIdleConnections() }

// Name returns "e2b".
func (p *Provider) Name() string { return Name }

// apiSandbox is what E2B's API says of a sandbox (its Sandbox, SandboxDetail and ListedSandbox).
type apiSandbox struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	ClientID        string            `json:"clientID,omitempty"`
	EnvdVersion     string            `json:"envdVersion,omitempty"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          string            `json:"domain,omitempty"`
	State           string            `json:"state,omitempty"` // running or paused
	Metadata        map[string]string `json:"metadata,omitempty"`
	EndAt           *time.Time        `json:"endAt,omitempty"`
}

// newSandbox is the body of POST /sandboxes.
type newSandbox struct {
	TemplateID string            `json:"templateID"`
	Timeout    int               `json:"timeout"` // seconds
	AutoPause  bool              `json:"autoPause"`
	Secure     bool              `json:"secure"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	EnvVars    map[string]string `json:"envVars,omitempty"`
}

// apiError is E2B's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Create starts an E2B sandbox from the spec's template and waits for its envd. The sandbox
// always has a daemon (E2B's envd), whatever spec.Daemon says.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Sandbox, error) {
	if err := names.CheckSandbox(spec.Name); err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	template := spec.Template
	if template == "" {
		template = p.cfg.Template
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = p.cfg.Workdir
	}
	if !path.IsAbs(workdir) {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: workdir %q is not absolute", spec.Name, workdir)
	}
	body := newSandbox{
		TemplateID: template,
		Timeout:    int(p.cfg.Timeout / time.Second),
		AutoPause:  p.cfg.AutoPause,
		// Secure makes envd require its access token on every request.
		Secure: true,
		Metadata: map[string]string{
			metaInstance: p.cfg.Instance,
			metaSandbox:  spec.Name,
			metaOwner:    spec.Owner,
			metaWorkdir:  workdir,
		},
		EnvVars: spec.Env,
	}
	if p.cfg.HarnessBinary != "" {
		body.Metadata[metaHarness] = p.cfg.HarnessPath
	}
	var created apiSandbox
	status, err := p.call(ctx, http.MethodPost, "/sandboxes", body, &created)
	switch {
	case status == http.StatusNotFound:
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: E2B has no template %q (build it with the E2B CLI, or fix its name): %w: %w",
			spec.Name, template, provider.ErrImageMissing, err)
	case err != nil:
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	if created.Metadata == nil {
		created.Metadata = body.Metadata
	}
	created.State = "running"
	sb := p.sandbox(created)
	if err := p.waitHealthy(ctx, sb.Daemon.URL); err != nil {
		sb.State = provider.StateFailed
		sb.Reason = fmt.Sprintf("E2B's envd at %s did not answer: %v", sb.Daemon.URL, err)
		return sb, nil
	}
	if workdir != p.cfg.Workdir {
		if err := p.makeDir(ctx, sb, workdir); err != nil {
			sb.State = provider.StateFailed
			sb.Reason = fmt.Sprintf("make workdir %s: %v", workdir, err)
			return sb, nil
		}
	}
	if p.cfg.HarnessBinary != "" {
		if err := p.uploadHarness(ctx, sb); err != nil {
			sb.State = provider.StateFailed
			sb.Reason = fmt.Sprintf("put hangar's harness into the sandbox: %v", err)
		}
	}
	return sb, nil
}

// uploadHarness writes Config.HarnessBinary to Config.HarnessPath through envd's files API as root,
// and makes it executable (an upload is 0644).
func (p *Provider) uploadHarness(ctx context.Context, sb provider.Sandbox) error {
	f, err := os.Open(p.cfg.HarnessBinary)
	if err != nil {
		return fmt.Errorf("open %s: %w", p.cfg.HarnessBinary, err)
	}
	defer f.Close()
	c, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken, User: "root", Protocol: envd.ProtocolHTTP1})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Upload(ctx, p.cfg.HarnessPath, f); err != nil {
		return err
	}
	ps, err := c.Start(ctx, envd.StartRequest{Cmd: "/bin/chmod", Args: []string{"0755", p.cfg.HarnessPath}})
	if err != nil {
		return fmt.Errorf("make %s executable: %w", p.cfg.HarnessPath, err)
	}
	defer ps.Close()
	for {
		ev, err := ps.Next()
		if err != nil {
			return fmt.Errorf("make %s executable: %w", p.cfg.HarnessPath, err)
		}
		if ev.Kind == envd.EventEnd {
			if ev.Exit == nil || ev.Exit.Code != 0 {
				return fmt.Errorf("make %s executable: chmod ended %+v", p.cfg.HarnessPath, ev.Exit)
			}
			return nil
		}
	}
}

// makeDir creates the workdir through envd's filesystem.Filesystem/MakeDir (Connect, JSON).
func (p *Provider) makeDir(ctx context.Context, sb provider.Sandbox, dir string) error {
	b, _ := json.Marshal(map[string]string{"path": dir})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.Daemon.URL+"/filesystem.Filesystem/MakeDir", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", sb.Daemon.AccessToken)
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	// An existing folder is as good as a new one.
	if resp.StatusCode == http.StatusOK || bytes.Contains(msg, []byte("already_exists")) {
		return nil
	}
	return fmt.Errorf("envd answered %s: %s", resp.Status, bytes.TrimSpace(msg))
}

// waitHealthy waits for envd at url to answer /health, until StartTimeout passes.
func (p *Provider) waitHealthy(ctx context.Context, url string) error {
	return provider.WaitHealthy(ctx, p.http, url, envd.Wait{Timeout: p.cfg.StartTimeout, Every: 100 * time.Millisecond, Ask: 5 * time.Second, Clock: p.cfg.Clock})
}

// healthy asks envd at url for /health once, for at most 5 s.
func (p *Provider) healthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return provider.Healthy(ctx, p.http, url)
}

// Get asks E2B for the sandbox; a running one's envd must answer /health.
func (p *Provider) Get(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	got, err := p.get(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("get sandbox %s: %w", sb.Name, err)
	}
	return p.checked(ctx, p.sandbox(got)), nil
}

// get asks E2B for the sandbox and makes sure it is this instance's.
func (p *Provider) get(ctx context.Context, sb provider.Sandbox) (apiSandbox, error) {
	var got apiSandbox
	if sb.ID == "" {
		return got, fmt.Errorf("no E2B sandbox id: %w", provider.ErrNotFound)
	}
	if _, err := p.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(sb.ID), nil, &got); err != nil {
		return got, err
	}
	if got.Metadata[metaInstance] != p.cfg.Instance || got.Metadata[metaSandbox] != sb.Name {
		return got, fmt.Errorf("E2B sandbox %s is not this control plane's sandbox %s: %w", sb.ID, sb.Name, provider.ErrNotFound)
	}
	return got, nil
}

// List returns this instance's running and paused sandboxes (GET /v2/sandboxes, every page).
func (p *Provider) List(ctx context.Context) ([]provider.Sandbox, error) {
	filter := url.Values{metaInstance: {p.cfg.Instance}}.Encode()
	var out []provider.Sandbox
	next := ""
	for {
		q := url.Values{"metadata": {filter}, "state": {"running,paused"}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		var page []apiSandbox
		_, hdr, err := p.do(ctx, http.MethodGet, "/v2/sandboxes?"+q.Encode(), nil, &page)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		for _, s := range page {
			if s.Metadata[metaInstance] != p.cfg.Instance {
				continue
			}
			// A listed sandbox carries no access token: ask for it.
			detail, err := p.get(ctx, provider.Sandbox{Name: s.Metadata[metaSandbox], ID: s.SandboxID})
			if errors.Is(err, provider.ErrNotFound) {
				continue // killed since the list
			}
			if err != nil {
				return nil, fmt.Errorf("list sandboxes: %w", err)
			}
			out = append(out, p.checked(ctx, p.sandbox(detail)))
		}
		next = hdr.Get("X-Next-Token")
		if next == "" || len(page) == 0 {
			return out, nil
		}
	}
}

// Destroy kills the sandbox.
func (p *Provider) Destroy(ctx context.Context, sb provider.Sandbox) error {
	if _, err := p.get(ctx, sb); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	if _, err := p.call(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(sb.ID), nil, nil); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	return nil
}

// Pause pauses the sandbox at E2B (its memory and files are kept; envd stops answering).
func (p *Provider) Pause(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	if _, err := p.get(ctx, sb); err != nil {
		return provider.Sandbox{}, fmt.Errorf("pause sandbox %s: %w", sb.Name, err)
	}
	status, err := p.call(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sb.ID)+"/pause", nil, nil)
	// 409: already paused, which is what was asked.
	if err != nil && status != http.StatusConflict {
		return provider.Sandbox{}, fmt.Errorf("pause sandbox %s: %w", sb.Name, err)
	}
	return p.Get(ctx, sb)
}

// Resume connects to the sandbox, which resumes it when paused, and waits for its envd.
func (p *Provider) Resume(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	if _, err := p.get(ctx, sb); err != nil {
		return provider.Sandbox{}, fmt.Errorf("resume sandbox %s: %w", sb.Name, err)
	}
	body := map[string]int{"timeout": int(p.cfg.Timeout / time.Second)}
	var resumed apiSandbox
	if _, err := p.call(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sb.ID)+"/connect", body, &resumed); err != nil {
		return provider.Sandbox{}, fmt.Errorf("resume sandbox %s: %w", sb.Name, err)
	}
	got, err := p.get(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("resume sandbox %s: %w", sb.Name, err)
	}
	out := p.sandbox(got)
	if err := p.waitHealthy(ctx, out.Daemon.URL); err != nil {
		out.State = provider.StateFailed
		out.Reason = fmt.Sprintf("E2B's envd at %s did not answer after resume: %v", out.Daemon.URL, err)
	}
	return out, nil
}

// Exec is not possible: E2B runs commands only through its envd, which the control plane uses.
func (p *Provider) Exec(context.Context, provider.Sandbox, provider.ExecRequest) (provider.ExecResult, error) {
	return provider.ExecResult{}, fmt.Errorf("exec: E2B runs commands only through its daemon: %w", provider.ErrUnsupported)
}

// sandbox is the provider's view of an E2B sandbox, without asking its envd.
func (p *Provider) sandbox(s apiSandbox) provider.Sandbox {
	domain := s.Domain
	if domain == "" {
		domain = p.cfg.Domain
	}
	daemonURL := strings.NewReplacer("{sandboxID}", s.SandboxID, "{domain}", domain).Replace(p.cfg.DaemonURL)
	sb := provider.Sandbox{
		Name:     s.Metadata[metaSandbox],
		Provider: Name,
		ID:       s.SandboxID,
		State:    provider.StateRunning,
		Workdir:  s.Metadata[metaWorkdir],
		Daemon:   &provider.Daemon{URL: daemonURL, AccessToken: s.EnvdAccessToken},
		Data:     map[string]string{"template": s.TemplateID, "domain": domain},
	}
	if s.EnvdVersion != "" {
		sb.Data["envd_version"] = s.EnvdVersion
	}
	if h := s.Metadata[metaHarness]; h != "" {
		sb.Data["harness"] = h
	}
	if s.EndAt != nil {
		sb.Data["end_at"] = s.EndAt.UTC().Format(time.RFC3339)
	}
	if s.State == "paused" {
		sb.State = provider.StatePaused
	}
	return sb
}

// checked asks a running sandbox's envd for /health.
func (p *Provider) checked(ctx context.Context, sb provider.Sandbox) provider.Sandbox {
	if sb.State != provider.StateRunning {
		return sb
	}
	if err := p.healthy(ctx, sb.Daemon.URL); err != nil {
		sb.State = provider.StateFailed
		sb.Reason = fmt.Sprintf("E2B's envd does not answer at %s: %v", sb.Daemon.URL, err)
	}
	return sb
}

// call makes an API request; see do.
func (p *Provider) call(ctx context.Context, method, path string, body, out any) (int, error) {
	status, _, err := p.do(ctx, method, path, body, out)
	return status, err
}

// do makes an API request with the API key, decodes a 2xx answer into out, and turns anything
// else into an error marked with the provider sentinel it means. It returns the status (0 when
// E2B did not answer) and the answer's headers.
func (p *Provider) do(ctx context.Context, method, path string, body, out any) (int, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.APIURL+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("call E2B: %w", err)
	}
	req.Header.Set("X-API-Key", p.cfg.APIKey)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.http.Do(req)
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection refused") {
			return 0, nil, fmt.Errorf("call E2B %s %s: %w: %w", method, path, provider.ErrUnavailable, err)
		}
		return 0, nil, fmt.Errorf("call E2B %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if out != nil && resp.StatusCode != http.StatusNoContent {
			if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
				return resp.StatusCode, resp.Header, fmt.Errorf("decode E2B's answer to %s %s: %w", method, path, err)
			}
		}
		return resp.StatusCode, resp.Header, nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var ae apiError
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &ae) == nil && ae.Message != "" {
		msg = ae.Message
	}
	err = fmt.Errorf("E2B answered %s %s with %s: %s", method, path, resp.Status, msg)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		err = fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		err = fmt.Errorf("E2B refused the API key: %w", err)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		err = fmt.Errorf("%w: %w", provider.ErrUnavailable, err)
	}
	return resp.StatusCode, resp.Header, err
}
