package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/term"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/fleet"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/mcp"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/docker"
	"github.com/hangar-dev/hangar/internal/provider/e2b"
	"github.com/hangar-dev/hangar/internal/provider/kubernetes"
	"github.com/hangar-dev/hangar/internal/provider/local"
	"github.com/hangar-dev/hangar/internal/rest"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/seal"
	"github.com/hangar-dev/hangar/internal/serving"
	"github.com/hangar-dev/hangar/internal/settings"
	"github.com/hangar-dev/hangar/internal/shed"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
	"github.com/hangar-dev/hangar/internal/watch"
)

// adminTokenFile is the file in the data dir that holds the first admin token.
const adminTokenFile = "admin-token"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := loadServeConfig(args, settings.LookupEnv, stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (HANGAR_LISTEN): %w", cfg.Listen, err)
	}
	// The process's garbage collector, here and not in serve, which tests call in theirs.
	if k := limits.KeepHeadroom(cfg.GCHeadroom); k != nil {
		defer k.Stop()
	}
	return serve(ctx, cfg, ln, stdout, stderr)
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // checked when the setting was parsed
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func openStore(ctx context.Context, cfg config.Config, clock quartz.Clock) (store.Store, string, error) {
	pool := sqlstore.Pool{MaxConns: cfg.DatabaseMaxConns, Wait: cfg.DatabaseWait, Clock: clock}
	if cfg.DatabaseURL != "" {
		s, err := postgres.OpenPool(ctx, cfg.DatabaseURL, pool)
		return s, "postgres", err
	}
	s, err := sqlite.OpenPool(ctx, cfg.DataDir, pool)
	return s, "sqlite " + filepath.Join(cfg.DataDir, sqlite.FileName), err
}

// e2bHarness is what E2B sandboxes get uploaded for their turns' harness: hangar-envd (bin,
// resolved by startDomain), when this hangar runs on linux/amd64 as E2B's VMs do (the two are
// built together); else nothing, said once.
func e2bHarness(bin string, log *slog.Logger) string {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		log.Warn("E2B sandboxes get no harness: this hangar is not built for linux/amd64", "goos", runtime.GOOS, "goarch", runtime.GOARCH)
		return ""
	}
	return bin
}

// dockerConfig is the docker provider's Config from hangar's settings.
func dockerConfig(pc config.Providers, log *slog.Logger) docker.Config {
	cpus, _ := strconv.ParseFloat(pc.DockerCPUs, 64) // checked by the setting
	pids := int64(pc.DockerPids)
	// The settings' 0 is no limit; the provider's, its default.
	if cpus == 0 {
		cpus = -1
	}
	if pids == 0 {
		pids = -1
	}
	return docker.Config{Host: pc.DockerHost, Image: pc.DockerImage, EnvdBinary: pc.DaemonBinary,
		MemoryBytes: pc.DockerMemoryBytes, CPUs: cpus, Pids: pids, DiskBytes: pc.DockerDiskBytes, Logger: log}
}

// kubernetesConfig is the kubernetes provider's Config from hangar's settings.
func kubernetesConfig(pc config.Providers, log *slog.Logger) kubernetes.Config {
	lifetime := pc.K8sMaxLifetime
	if lifetime == 0 {
		lifetime = -1 // the setting's 0 is no bound; the provider's, its default
	}
	return kubernetes.Config{Kubeconfig: pc.K8sKubeconfig, Namespace: pc.K8sNamespace, Image: pc.K8sImage,
		HangarImage: pc.K8sHangarImage, DaemonVia: pc.K8sDaemonVia, RuntimeClassName: pc.K8sRuntimeClass,
		RunAsRoot: pc.K8sRunAsRoot, RunAsUser: int64(pc.K8sRunAsUser), RunAsGroup: int64(pc.K8sRunAsGroup),
		Resources: kubernetes.Resources{
			CPURequest: pc.K8sCPURequest, CPULimit: pc.K8sCPULimit,
			MemoryRequest: pc.K8sMemoryRequest, MemoryLimit: pc.K8sMemoryLimit,
			EphemeralStorageRequest: pc.K8sEphemeralStorageRequest, EphemeralStorageLimit: pc.K8sEphemeralStorageLimit,
		},
		MaxLifetime: lifetime, Logger: log}
}

// reconcileTimeout bounds the look at stored sandboxes at start.
const reconcileTimeout = 30 * time.Second

// newSandboxes sets up the providers and the sandbox manager over them.
// Its close function releases the providers' connections.
func newSandboxes(cfg config.Config, st store.Store, streams *stream.Registry, clock quartz.Clock, log *slog.Logger, owners sandbox.Owners) (*sandbox.Manager, func(), error) {
	pc := cfg.Providers
	loc, err := local.New(local.Config{DataDir: cfg.DataDir, EnvdBinary: pc.DaemonBinary, Clock: clock, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	dc := dockerConfig(pc, log)
	dc.Clock = clock
	dock, err := docker.New(dc)
	if err != nil {
		return nil, nil, err
	}
	providers := map[string]provider.Provider{"docker": dock}
	closers := []func(){func() { dock.Close() }}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	unconfigured := map[string]string{}
	if pc.Local {
		providers["local"] = loc
	} else {
		unconfigured["local"] = "this hangar turned it off (HANGAR_LOCAL_PROVIDER=false): its sandboxes would run commands inside the control plane"
	}
	if pc.K8sNamespace != "" {
		k8s, err := kubernetes.New(kubernetesConfig(pc, log))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("the kubernetes provider (HANGAR_K8S_NAMESPACE=%s): %w", pc.K8sNamespace, err)
		}
		providers["kubernetes"] = k8s
		closers = append(closers, k8s.Close)
	} else {
		unconfigured["kubernetes"] = "set HANGAR_K8S_NAMESPACE (and run hangar where it can reach the cluster)"
	}
	if pc.E2BAPIKey != "" {
		e2bp, err := e2b.New(e2b.Config{APIKey: pc.E2BAPIKey, APIURL: pc.E2BAPIURL, Domain: pc.E2BDomain, Template: pc.E2BTemplate, Clock: clock, Logger: log,
			HarnessBinary: e2bHarness(pc.DaemonBinary, log)})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("the e2b provider: %w", err)
		}
		providers["e2b"] = e2bp
		closers = append(closers, e2bp.Close)
	} else {
		unconfigured["e2b"] = "set HANGAR_E2B_API_KEY"
	}
	if _, ok := providers[pc.Default]; !ok {
		closeAll()
		return nil, nil, fmt.Errorf("HANGAR_DEFAULT_PROVIDER=%s, but that provider is not set up: %s", pc.Default, unconfigured[pc.Default])
	}
	if pc.Local {
		log.Warn("the local provider isolates nothing: its sandboxes are folders under the data dir, and their commands run as this user on this machine (HANGAR_LOCAL_PROVIDER=false turns it off)", "dir", filepath.Join(cfg.DataDir, "sandboxes"))
	}
	m := sandbox.New(sandbox.Config{Store: st, Streams: streams, Providers: providers, Unconfigured: unconfigured, Default: pc.Default, Clock: clock, Logger: log, Owners: owners})
	return m, func() { m.Close(); closeAll() }, nil
}

// outOfDescriptors is the answer to a connection hangar cannot take for want of a descriptor,
// in the shape of every REST error.
const outOfDescriptors = `{"error":{"code":"unavailable","message":"hangar is out of file descriptors, so it cannot take this connection now; try again in a moment (if it lasts, raise its RLIMIT_NOFILE or spread the load over more replicas)."}}`

// serve runs the control plane on ln until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg config.Config, ln net.Listener, stdout, stderr io.Writer) error {
	defer ln.Close()
	log := newLogger(cfg, stderr)
	if _, err := limits.RaiseOpenFiles(log); err != nil {
		log.Warn("the open files limit stays where it was", "error", err)
	}
	// Sandboxes' daemons run in other working directories and outlive this process: every
	// path handed to them must be absolute.
	dataDir, err := resolveDataDir(cfg.DataDir, cfg.Providers.Local)
	if err != nil {
		return err
	}
	cfg.DataDir = dataDir
	if err := secureDataDir(dataDir, log); err != nil {
		return err
	}
	for _, name := range []string{secretFile, adminTokenFile} { // made 0600; older ones tightened
		if err := privateFile(filepath.Join(dataDir, name)); err != nil {
			return fmt.Errorf("make %s private: %w", filepath.Join(dataDir, name), err)
		}
	}

	// The one clock of everything where time decides: pacing, stalls, timeouts, lifetimes,
	// polls, rechecks, retention and the times stamped on what is stored.
	clock := quartz.NewReal()
	st, where, err := openStore(ctx, cfg, clock)
	if err != nil {
		return err
	}
	defer st.Close()

	authn, err := auth.New(ctx, auth.Config{Store: st, TokensFile: cfg.TokensFile, MaxPerUser: cfg.TokensMaxPerUser, Clock: clock, Logger: log})
	if err != nil {
		return err
	}
	if err := bootstrapAdmin(ctx, authn, cfg.DataDir, stdout); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool, ok := st.(interface{ Collectors() []prometheus.Collector }); ok {
		reg.MustRegister(pool.Collectors()...) // go_sql_*{db_name="hangar"}: how full the store's pool is
	}
	tracer, stopTracing, err := newTracer(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	// With PostgreSQL, one of several replicas. Stopped after the domain (deferred first): its
	// leases are handed back once nothing here follows their sandboxes.
	rp, err := joinReplicas(ctx, cfg, ln.Addr(), reg, clock, log)
	if err != nil {
		return err
	}
	defer rp.stop()
	streams := stream.New(stream.Config{
		MaxPerToken: cfg.Stream.MaxPerToken, MaxPerUser: cfg.Stream.MaxPerUser, MaxTotal: cfg.Stream.MaxTotal, BytesPerSecond: cfg.Stream.BytesPerSecond,
		MaxBytes: cfg.Stream.MaxBytes, MaxLifetime: time.Duration(cfg.Stream.MaxHours) * time.Hour,
		Recheck: time.Duration(cfg.Stream.RecheckSeconds) * time.Second, QueueBytes: cfg.Stream.QueueBytes, Check: authn.Recheck,
		Registerer: reg, Tracer: tracer, Logger: log, Clock: clock, Announce: rp.announce(), Shared: rp.shared(),
	})
	rechecks, stopRechecks := context.WithCancel(context.WithoutCancel(ctx))
	recheckDone := make(chan struct{})
	go func() { streams.Run(rechecks); close(recheckDone) }()
	defer func() { stopRechecks(); <-recheckDone }()

	d, closeDomain, err := startDomain(ctx, cfg, st, streams, clock, log, rp)
	if err != nil {
		return err
	}
	defer closeDomain() // after the shutdown below ended the streams: the followers return
	rp.start(streams)

	oauthServer, oauthHTTP, err := newOAuth(cfg, st, authn, streams, clock, log)
	if err != nil {
		return err
	}
	taken := new(serving.TakenConns) // SSE streams' connections taken over, REST's and MCP's
	mcpCfg := mcp.Config{Taken: taken, Auth: authn, Sandboxes: d.sandboxes, Streams: streams, Processes: d.processes, Forward: rp.forwarder(streams), Replicas: rp.sessions(), Watches: d.watches, Turns: d.turns, Logger: log, Version: version, Clock: clock, MaxBodyBytes: cfg.MaxBodyBytes,
		SessionIdle: time.Duration(cfg.MCP.SessionIdleSeconds) * time.Second, SessionsPerToken: cfg.MCP.SessionsPerToken,
		Recheck: time.Duration(cfg.Stream.RecheckSeconds) * time.Second}
	if oauthServer != nil {
		mcpCfg.Resource, mcpCfg.ResourceMetadataURL = oauthServer.Resource(), oauthServer.ResourceMetadataURL()
	}
	mcpHandler := mcp.New(mcpCfg)
	mcpRechecked := make(chan struct{})
	go func() { mcpHandler.Run(rechecks); close(mcpRechecked) }()
	defer func() { stopRechecks(); <-mcpRechecked }()

	e2bHandler, e2bDaemon, err := newE2BAPI(cfg, authn, d, streams, clock, log)
	if err != nil {
		return err
	}
	// Sandboxes whose time (the E2B API's timeout) is up are ended, each by its owner replica.
	deadlines, stopDeadlines := context.WithCancel(context.WithoutCancel(ctx))
	deadlinesDone := make(chan struct{})
	go func() { d.sandboxes.RunDeadlines(deadlines, time.Second); close(deadlinesDone) }()
	defer func() { stopDeadlines(); <-deadlinesDone }()

	srv := rest.New(rest.Config{Taken: taken, E2B: e2bHandler, E2BSandbox: e2bDaemon, Auth: authn, Ready: readiness(st, cfg.DataDir), Sandboxes: d.sandboxes, Streams: streams, Processes: d.processes, Turns: d.turns, Watches: d.watches, Fleet: d.fleet, Registry: reg, Logger: log, Clock: clock, MaxBodyBytes: cfg.MaxBodyBytes, BodyTimeout: cfg.BodyTimeout, BodyMinRate: cfg.BodyMinRate, MCP: mcpHandler, OAuth: oauthServer, OAuthHTTP: oauthHTTP,
		Forward: rp.forwarder(streams), MetricsElsewhere: cfg.MetricsListen != ""})
	if cfg.MetricsListen != "" {
		stopMetrics, err := serveMetrics(cfg.MetricsListen, reg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	if cfg.PprofListen != "" {
		stopPprof, err := servePprof(cfg.PprofListen, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	// Said before serving (ln takes connections already), so it is in the log before any answer.
	log.Info("hangar serving", "addr", ln.Addr().String(), "fleet", pageURL(ln.Addr()), "store", where, "version", version)
	served := make(chan error, 1)
	// Out of file descriptors, a new connection is answered 503 saying so, not left waiting in
	// the backlog; what is open goes on.
	go func() { served <- srv.Serve(shed.NewListener(ln, log, outOfDescriptors)) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return shutdown(ctx, cfg, log, streams, rp, mcpHandler, srv, served)
}

// newE2BAPI is hangar's E2B-compatible API (/e2b, E2B_API_URL=<hangar>/e2b) and its daemon
// pass-through (/e2b/sandbox, E2B_SANDBOX_URL), which share the access tokens (grants).
func newE2BAPI(cfg config.Config, authn *auth.Authenticator, d domain, streams *stream.Registry, clock quartz.Clock, log *slog.Logger) (api, daemon http.Handler, err error) {
	grants, err := e2bapi.NewGrants(d.secret, authn, d.sandboxes)
	if err != nil {
		return nil, nil, err
	}
	templates, err := e2bapi.ParseTemplates(cfg.E2BTemplates) // checked by its setting already
	if err != nil {
		return nil, nil, fmt.Errorf("HANGAR_E2B_TEMPLATES: %w", err)
	}
	api = e2bapi.New(e2bapi.Config{Auth: authn, Sandboxes: d.sandboxes, Grants: grants, Templates: templates, Clock: clock, Logger: log})
	daemon = e2bapi.NewDaemon(e2bapi.DaemonConfig{Grants: grants, Daemons: d.sandboxes, Streams: streams, Logger: log})
	return api, daemon, nil
}

// domain is what the transports serve: the sandboxes, the processes and the sessions' turns.
type domain struct {
	sandboxes *sandbox.Manager
	processes *process.Manager
	turns     *turns.Service
	watches   *watch.Service
	fleet     *fleet.Service
	secret    []byte // the control plane's secret (HANGAR_SECRET), for the E2B API's access tokens
}

// startDomain sets up the sandboxes, the processes in them and the sessions' turns, and brings
// them up to date with the world: sandboxes are reconciled with their providers, every process
// the records say runs is followed again now, not when its owner next asks (so revoking its
// token kills it, and admins see it, across restarts), and every running turn is watched again.
// close stops the turns' watchers, closes the processes, then the sandboxes.
func startDomain(ctx context.Context, cfg config.Config, st store.Store, streams *stream.Registry, clock quartz.Clock, log *slog.Logger, rp *membership) (
	d domain, close func(), err error) {
	bin, err := envdBinary(cfg.Providers.DaemonBinary, log)
	if err != nil {
		return d, nil, err
	}
	cfg.Providers.DaemonBinary = bin
	sandboxes, closeSandboxes, err := newSandboxes(cfg, st, streams, clock, log, rp.owners())
	if err != nil {
		return d, nil, err
	}
	rctx, rcancel := context.WithTimeout(ctx, reconcileTimeout)
	sandboxes.Reconcile(rctx)
	rcancel()

	secret, err := loadSecret(cfg)
	if err != nil {
		closeSandboxes()
		return d, nil, err
	}
	processes, err := process.New(process.Config{Sandboxes: sandboxes, Streams: streams, Secret: secret, Store: st, Clock: clock,
		MaxPerToken: cfg.Stream.BackgroundMaxPerToken, MaxPerUser: cfg.Stream.BackgroundMaxPerUser, Logger: log, Owners: rp.owners()})
	if err != nil {
		closeSandboxes()
		return d, nil, err
	}
	rp.setLeases(processes)
	actx, acancel := context.WithTimeout(ctx, reconcileTimeout)
	processes.AdoptAll(actx)
	acancel()

	ts, stopTurns, err := startTurns(ctx, cfg, st, sandboxes, streams, clock, log, rp, secret)
	if err != nil {
		processes.Close()
		closeSandboxes()
		return d, nil, err
	}
	watches := watch.New(watch.Config{Sandboxes: sandboxes, Streams: streams, MaxPerToken: cfg.Stream.WatchMaxPerToken, Clock: clock, Logger: log,
		Shared: rp.shared()})
	fl := fleet.New(fleet.Config{Store: st, Processes: processes, Streams: streams, StuckAfter: cfg.StuckAfter, Clock: clock, Logger: log})
	return domain{sandboxes, processes, ts, watches, fl, secret}, func() { fl.Close(); watches.Close(); stopTurns(); processes.Close(); closeSandboxes() }, nil
}

// envdBinary is the hangar-envd that sandboxes run (the daemon, the turn harness): the one
// --daemon-binary names, else provider.DefaultEnvdBinary's (beside this executable, else this
// executable, whose envd and harness verbs are the same code, with a warning: every sandbox
// then carries the whole control plane's binary).
func envdBinary(set string, log *slog.Logger) (string, error) {
	if set != "" {
		return set, nil
	}
	bin, fallback, err := provider.DefaultEnvdBinary()
	if err != nil {
		return "", fmt.Errorf("find hangar-envd: %w", err)
	}
	if fallback {
		log.Warn("no hangar-envd beside hangar: sandboxes run this binary as their daemon and harness (make build builds both; or set --daemon-binary)", "binary", bin)
	}
	return bin, nil
}

// startTurns starts the sessions' turns service: running turns are watched again, and old
// events are deleted hourly. stop ends both.
func startTurns(ctx context.Context, cfg config.Config, st store.Store, sandboxes *sandbox.Manager, streams *stream.Registry, clock quartz.Clock, log *slog.Logger, rp *membership,
	secret []byte) (*turns.Service, func(), error) {
	host := cfg.Providers.DaemonBinary // resolved by startDomain
	envSeal, err := seal.New(secret, turns.EnvPurpose)
	if err != nil {
		return nil, nil, err
	}
	ts := turns.New(turns.Config{
		Store: st, Sandboxes: turns.FromManager(sandboxes), HarnessBinary: turns.HarnessBinaries(host),
		PollInterval: time.Duration(cfg.Turns.PollSeconds) * time.Second, Follow: cfg.Turns.FollowLogs,
		FollowMaxBytes: cfg.Stream.MaxBytes, EventRetention: time.Duration(cfg.Turns.EventRetentionDays) * 24 * time.Hour,
		Clock: clock, Logger: log, Streams: streams, Replicas: rp.forTurns(), EnvSeal: envSeal,
	})
	rp.setTurns(ts)
	rctx, rcancel := context.WithTimeout(ctx, reconcileTimeout)
	err = ts.Resume(rctx)
	if err == nil {
		var n int
		if n, err = ts.SealStoredEnv(rctx); n > 0 {
			log.Info("sealed the env that an older hangar kept in the clear", "sessions", n)
		}
	}
	rcancel()
	if err != nil {
		ts.Close()
		return nil, nil, err
	}
	retention, stopRetention := context.WithCancel(context.WithoutCancel(ctx))
	retained := make(chan struct{})
	go func() { ts.RunRetention(retention); close(retained) }()
	return ts, func() { stopRetention(); <-retained; ts.Close() }, nil
}

// shutdown ends a serve whose ctx ended: streams end at once; with other replicas, this one's
// sandboxes are handed to them; then new requests get 503, and the requests in flight have
// cfg.ShutdownGrace to finish (MCP's calls first, so they can send their results before the
// sessions close, then the HTTP server's). served is the HTTP server's Serve result.
func shutdown(ctx context.Context, cfg config.Config, log *slog.Logger, streams *stream.Registry, rp *membership,
	mcpHandler *mcp.Handler, srv *rest.Server, served <-chan error) error {
	log.Info("shutting down: streams end now, new requests get 503 once the sandboxes are handed over, in-flight ones may finish", "grace", cfg.ShutdownGrace)
	streams.Shutdown()
	// With other replicas: they follow this one's sandboxes from now on. Meanwhile requests
	// about them are still taken here and wait for the handover (replicas.Cluster.Owner), then go
	// to the new owner; after it, new ones are refused (forwarded ones marked so that their
	// replica asks the new owner), as the MCP handler waits for the calls in flight.
	rp.handOver()
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	if err := mcpHandler.Shutdown(sctx); err != nil {
		log.Warn("shutdown mcp", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("hangar stopped")
	return nil
}

// serveMetrics serves reg at /metrics on addr (HANGAR_METRICS_LISTEN) until the returned function
// is called: after the main server's shutdown, so a rollout's last scrape still answers.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (HANGAR_METRICS_LISTEN): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	log.Info("serving /metrics", "addr", ln.Addr().String())
	return func() { srv.Close(); <-done }, nil
}

// servePprof serves net/http/pprof on addr until the returned function is called.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (HANGAR_PPROF_LISTEN): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	log.Warn("serving the profiler", "addr", ln.Addr().String())
	return func() { srv.Close(); <-done }, nil
}

// secretFile is the file in the data dir that keeps the control plane's key (process tags,
// sealed env) when HANGAR_SECRET is not set.
const secretFile = "secret"

// loadSecret returns HANGAR_SECRET, or the key kept in the data dir (made on first use).
func loadSecret(cfg config.Config) ([]byte, error) {
	if cfg.Secret != "" {
		return []byte(cfg.Secret), nil
	}
	path := filepath.Join(cfg.DataDir, secretFile)
	switch b, err := os.ReadFile(path); {
	case err == nil && len(b) >= 32:
		return b, nil
	case err == nil:
		// Never replaced: sessions' env sealed with it would not open again.
		return nil, fmt.Errorf("%s has %d bytes, and a key needs at least 32: restore it from a backup, or remove it to make a new one (sessions' stored env is lost with the old key)", path, len(b))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read the control plane's key: %w", err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	key := []byte(hex.EncodeToString(b))
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("keep the control plane's key in %s: %w", path, err)
	}
	return key, nil
}

// bootstrapAdmin makes the first admin token on a store that never had a token, when the tokens
// file names no admin, and writes it to <data dir>/admin-token, readable by its owner only. The
// file is made first: one that cannot be made fails the start with no token made, so the next
// start tries again. The token itself is printed only to a terminal: a server's standard
// output is usually a log (Cloud Logging, journald) that many can read and that keeps it.
// Elsewhere stdout says where the file is and how to read it (`hangar admin-token`, for an
// image with no shell).
func bootstrapAdmin(ctx context.Context, authn *auth.Authenticator, dataDir string, stdout io.Writer) error {
	if needed, err := authn.NeedsBootstrap(ctx); err != nil || !needed {
		return err
	}
	path := filepath.Join(dataDir, adminTokenFile)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// O_EXCL: never overwrite a file someone else put there.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make the first admin token: %s already exists; move it away to keep the new admin token there", path)
	}
	if err != nil {
		return fmt.Errorf("make the first admin token: %w", err)
	}
	secret, created, err := authn.Bootstrap(ctx)
	if err != nil || !created { // another replica made it meanwhile
		f.Close()
		os.Remove(path)
		return err
	}
	_, err = fmt.Fprintln(f, secret)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case isTerminal(stdout):
		fmt.Fprintf(stdout, "hangar: first start, so here is the admin token (shown this once; also in %s):\n\n    %s\n\n", path, secret)
	case err == nil:
		host, _ := os.Hostname()
		fmt.Fprintf(stdout, "hangar: first start, so an admin token was made; it is in %s on %s, and nowhere else: read it there with `hangar admin-token` "+
			"(on Kubernetes: kubectl exec %s -- hangar admin-token)\n", path, host, host)
	}
	if err != nil {
		// Not kept, and not printed to a log: name an admin in the tokens file to get in.
		return fmt.Errorf("write the first admin token to %s: %w; it is lost: name an admin in the tokens file (HANGAR_TOKENS_FILE, docs/tokens.md) to get in", path, err)
	}
	return nil
}

// isTerminal says whether w is a terminal, where a person reads what is printed once.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pageURL is the Fleet page's address on a listener at addr: what a person opens in a browser
// on this machine (localhost for a listener on every address).
func pageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/fleet/"
}
