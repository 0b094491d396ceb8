package main

import (
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/addrlimit"
	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/e2bapi"
	"github.com/hangar-dev/hangar/internal/provider/kubernetes"
	"github.com/hangar-dev/hangar/internal/settings"
)

const serveSummary = "Runs the control plane: REST (/api), MCP (/mcp), /healthz, /readyz and /metrics on one listener."

// serveSettings binds every setting of `hangar serve` to its field in c.
func serveSettings(c *config.Config) []settings.Setting {
	return []settings.Setting{
		{Name: "listen", Arg: "ADDR", Usage: "address of the one listener (host:port)", Value: settings.String{P: &c.Listen, Check: settings.HostPort}},
		{Name: "data-dir", Arg: "DIR", Usage: "where the SQLite database, the admin token file and local sandboxes live", Value: settings.String{P: &c.DataDir, Check: settings.NonEmpty}},
		{Name: "database-url", Arg: "URL", Usage: "PostgreSQL to use instead of SQLite (postgres://user:password@host:5432/db)", Value: settings.String{P: &c.DatabaseURL, Check: postgresURL}},
		{Name: "database-max-conns", Arg: "N", Usage: "connections this hangar may hold open to its database, in use and idle (with PostgreSQL each replica keeps 4 more for leases, its presence and notifications)", Value: settings.Int{P: &c.DatabaseMaxConns, Min: 1, Max: 10_000}},
		{Name: "database-wait", Arg: "DURATION", Usage: "how long a request waits for a database connection when all are in use (past it: 503 with Retry-After)", Value: settings.Duration{P: &c.DatabaseWait, Min: time.Millisecond, Max: time.Hour}},
		{Name: "tokens-file", Arg: "FILE", Usage: "static tokens, one per line: TOKEN USER SCOPES [SANDBOX]", Value: settings.String{P: &c.TokensFile, Check: settings.NonEmpty}},
		{Name: "tokens-max-per-user", Arg: "N", Usage: "live tokens and OAuth grants one user may hold (expired and revoked ones do not count; static tokens neither)", Value: settings.Int{P: &c.TokensMaxPerUser, Min: 1, Max: 1_000_000}},
		{Name: "log-format", Arg: "FORMAT", Usage: "text or json", Value: settings.String{P: &c.LogFormat, Check: settings.OneOf("text", "json")}},
		{Name: "log-level", Arg: "LEVEL", Usage: "debug, info, warn or error", Value: settings.String{P: &c.LogLevel, Check: settings.OneOf("debug", "info", "warn", "error")}},
		{Name: "shutdown-grace", Arg: "DURATION", Usage: "how long in-flight requests may take to finish on SIGTERM/SIGINT", Value: settings.Duration{P: &c.ShutdownGrace, Min: time.Millisecond, Max: time.Hour}},
		{Name: "max-body-bytes", Arg: "BYTES", Usage: "the largest request body accepted (larger: 413)", Value: settings.Size{P: &c.MaxBodyBytes, Min: 1 << 10, Max: 1 << 30}},
		{Name: "body-timeout", Arg: "DURATION", Usage: "how long a request body may take to arrive, plus a second per body-min-bytes-per-second bytes that arrived (past it: 408)", Value: settings.Duration{P: &c.BodyTimeout, Min: time.Second, Max: time.Hour}},
		{Name: "body-min-bytes-per-second", Arg: "BYTES", Usage: "the rate that earns a slow request body (a large upload) time beyond body-timeout", Value: settings.Size{P: &c.BodyMinRate, Min: 1, Max: 1 << 30}},
		{Name: "trusted-proxies", Arg: "CIDRS", Usage: "comma-separated addresses or CIDR prefixes of the proxies whose X-Forwarded-For names the client that per-address limits count (default: none, the connection's peer)", Value: settings.String{P: &c.TrustedProxies, Check: prefixList}},
		{Name: "metrics-listen", Arg: "ADDR", Usage: "serve /metrics on this separate address (0.0.0.0:9090), and not on listen's (default: on listen's)", Value: settings.String{P: &c.MetricsListen, Check: settings.HostPort}},
		{Name: "gc-headroom", Arg: "BYTES", Usage: "how much the heap may grow past what the last garbage collection found live before the next (a floor under GOGC's doubling, so a small heap is not collected every few MiB; 0: GOGC alone; GOGC, when set, wins)", Value: settings.Size{P: &c.GCHeadroom, Min: 0, Max: 1 << 40}},
		{Name: "pprof-listen", Arg: "ADDR", Usage: "serve Go's profiler (/debug/pprof/) on this separate address; keep it on loopback", Value: settings.String{P: &c.PprofListen, Check: settings.HostPort}},
		{Name: "public-url", Arg: "URL", Usage: "the URL clients reach hangar at (https://hangar.example.com); setting it serves OAuth for MCP clients", Value: settings.String{P: &c.PublicURL, Check: originURL}},
		{Name: "oauth-client-id-hosts", Arg: "HOSTS", Usage: "comma-separated hosts whose https URLs MCP clients may use as client ids (metadata documents); * for any", Value: settings.String{P: &c.OAuth.ClientIDHosts, Check: hostList}},
		{Name: "oauth-access-token-ttl", Arg: "DURATION", Usage: "how long an OAuth access token lives (a refresh makes another)", Value: settings.Duration{P: &c.OAuth.AccessTokenTTL, Min: time.Minute, Max: 24 * time.Hour}},
		{Name: "oauth-register-per-minute", Arg: "N", Usage: "open OAuth client registrations per client address per minute (past it: 429)", Value: settings.Int{P: &c.OAuth.RegisterPerMinute, Min: 1, Max: 100_000}},
		{Name: "oauth-consent-per-minute", Arg: "N", Usage: "posts of the OAuth consent form per client address per minute (past it: 429)", Value: settings.Int{P: &c.OAuth.ConsentPerMinute, Min: 1, Max: 100_000}},
		{Name: "secret", Arg: "SECRET", Usage: "at least 32 characters keying background processes' tags and sealing sessions' env; the same on every replica (default: random, kept in <data dir>/secret)", Value: settings.String{P: &c.Secret, Check: settings.MinLen(32)}},
		{Name: "stream-max-per-token", Arg: "N", Usage: "open streams per token, of every kind: execs, attaches, events, watches, the fleet, MCP subscriptions", Value: settings.Int{P: &c.Stream.MaxPerToken, Min: 1, Max: 100_000}},
		{Name: "stream-max-per-user", Arg: "N", Usage: "open streams per user, through all its tokens and across replicas", Value: settings.Int{P: &c.Stream.MaxPerUser, Min: 1, Max: 1_000_000}},
		{Name: "stream-max-total", Arg: "N", Usage: "open streams in all, hangar's own included", Value: settings.Int{P: &c.Stream.MaxTotal, Min: 1, Max: 1_000_000}},
		{Name: "stream-bytes-per-second", Arg: "BYTES", Usage: "pace of each stream; every message also counts 64 bytes", Value: settings.Size{P: &c.Stream.BytesPerSecond, Min: 1 << 10, Max: 1 << 40}},
		{Name: "stream-max-bytes", Arg: "BYTES", Usage: "bytes one stream may send; past it nothing more is sent", Value: settings.Size{P: &c.Stream.MaxBytes, Min: 1 << 10, Max: 1 << 40}},
		{Name: "background-max-per-token", Arg: "N", Usage: "running background processes per token (an OAuth grant's tokens count as one)", Value: settings.Int{P: &c.Stream.BackgroundMaxPerToken, Min: 1, Max: 10_000}},
		{Name: "background-max-per-user", Arg: "N", Usage: "running background processes per user, through all its tokens and across replicas", Value: settings.Int{P: &c.Stream.BackgroundMaxPerUser, Min: 1, Max: 100_000}},
		{Name: "stream-max-hours", Arg: "N", Usage: "an event, watch or fleet stream (or MCP subscription) open longer is closed", Value: settings.Int{P: &c.Stream.MaxHours, Min: 1, Max: 24 * 365}},
		{Name: "watch-max-per-token", Arg: "N", Usage: "directory watches per token: REST watch streams and MCP subscriptions", Value: settings.Int{P: &c.Stream.WatchMaxPerToken, Min: 1, Max: 10_000}},
		{Name: "stream-recheck-seconds", Arg: "N", Usage: "how often open streams check that their token is still valid", Value: settings.Int{P: &c.Stream.RecheckSeconds, Min: 1, Max: 3600}},
		{Name: "stream-queue-bytes", Arg: "BYTES", Usage: "what may wait in one stream's queue; past it a streamed command is held back to the pace", Value: settings.Size{P: &c.Stream.QueueBytes, Min: 64 << 10, Max: 1 << 30}},
		{Name: "mcp-session-idle-seconds", Arg: "N", Usage: "a 2025-era MCP session with no request for this long is closed", Value: settings.Int{P: &c.MCP.SessionIdleSeconds, Min: 1, Max: 7 * 24 * 3600}},
		{Name: "mcp-sessions-per-token", Arg: "N", Usage: "2025-era MCP sessions one token may hold open (one more initialize: 429)", Value: settings.Int{P: &c.MCP.SessionsPerToken, Min: 1, Max: 100_000}},
		{Name: "session-poll-seconds", Arg: "N", Usage: "how often a running turn's run log is read when it is not followed", Value: settings.Int{P: &c.Turns.PollSeconds, Min: 1, Max: 3600}},
		{Name: "stream-turn-logs", Arg: "BOOL", Usage: "follow running turns' logs through the daemon (false: polling only)", Value: settings.Bool{P: &c.Turns.FollowLogs}},
		{Name: "stuck-after", Arg: "DURATION", Usage: "how long a running agent may record nothing (no event of any kind) before the Fleet and its inbox call it stuck", Value: settings.Duration{P: &c.StuckAfter, Min: time.Second, Max: 7 * 24 * time.Hour}},
		{Name: "event-retention-days", Arg: "N", Usage: "how long sessions' and jobs' events are kept (0: kept for good)", Value: settings.Int{P: &c.Turns.EventRetentionDays, Min: 0, Max: 36500}},
		{Name: "advertise-url", Arg: "URL", Usage: "with PostgreSQL: where the other replicas reach this one (default: http://<listen address>, the hostname when it listens on all interfaces)", Value: settings.String{P: &c.Replicas.AdvertiseURL, Check: settings.HTTPURL}},
		{Name: "lease-seconds", Arg: "N", Usage: "with PostgreSQL: how long a replica owns a sandbox's followers without renewing its lease (the takeover bound for a replica cut off with its connections open; a killed one is seen dead within a second)", Value: settings.Int{P: &c.Replicas.LeaseSeconds, Min: 1, Max: 3600}},
		{Name: "default-provider", Arg: "NAME", Usage: "the provider of a sandbox whose request names none: local, docker, kubernetes or e2b", Value: settings.String{P: &c.Providers.Default, Check: settings.OneOf("local", "docker", "kubernetes", "e2b")}},
		{Name: "local-provider", Arg: "BOOL", Usage: "offer the local provider, whose sandboxes run commands as this user on this machine and isolate nothing (false in a shared deployment)", Value: settings.Bool{P: &c.Providers.Local}},
		{Name: "daemon-binary", Arg: "FILE", Usage: "the static hangar-envd that sandboxes run as their daemon and turn harness (default: hangar-envd beside this executable, else this executable)", Value: settings.String{P: &c.Providers.DaemonBinary, Check: settings.NonEmpty}},
		{Name: "docker-host", Arg: "URL", Usage: "the Docker engine's address", Value: settings.String{P: &c.Providers.DockerHost, Check: dockerHost}},
		{Name: "docker-image", Arg: "IMAGE", Usage: "the image of a docker sandbox whose request names none (never pulled)", Value: settings.String{P: &c.Providers.DockerImage, Check: settings.NonEmpty}},
		{Name: "docker-memory", Arg: "BYTES", Usage: "a docker sandbox's memory limit, swap included (past it the kernel's OOM killer ends a process in it)", Value: settings.Size{P: &c.Providers.DockerMemoryBytes, Min: 6 << 20, Max: 1 << 40}},
		{Name: "docker-cpus", Arg: "N", Usage: "how many CPUs a docker sandbox may use, like 2 or 0.5 (0: no limit)", Value: settings.String{P: &c.Providers.DockerCPUs, Check: cpus}},
		{Name: "docker-pids", Arg: "N", Usage: "how many processes and threads a docker sandbox may have at once; one more fork fails (0: no limit)", Value: settings.Int{P: &c.Providers.DockerPids, Min: 0, Max: 1 << 22}},
		{Name: "docker-disk", Arg: "BYTES", Usage: "a docker sandbox's disk (its writable layer); only engines on overlay2 over xfs with pquota (or devicemapper, btrfs, zfs) can bound it (0: no bound)", Value: settings.OptionalSize{Size: settings.Size{P: &c.Providers.DockerDiskBytes, Min: 1 << 20, Max: 1 << 50}}},
		{Name: "k8s-namespace", Arg: "NAMESPACE", Usage: "the namespace of kubernetes sandboxes' pods; setting it offers the kubernetes provider", Value: settings.String{P: &c.Providers.K8sNamespace, Check: settings.NonEmpty}},
		{Name: "k8s-image", Arg: "IMAGE", Usage: "the image of a kubernetes sandbox whose request names none", Value: settings.String{P: &c.Providers.K8sImage, Check: settings.NonEmpty}},
		{Name: "k8s-hangar-image", Arg: "IMAGE", Usage: "an image with hangar-envd at /usr/local/bin/hangar-envd, which an init container runs as `hangar-envd install` to copy it into each pod (default: ghcr.io/hangar-dev/hangar:latest)", Value: settings.String{P: &c.Providers.K8sHangarImage, Check: settings.NonEmpty}},
		{Name: "k8s-daemon-via", Arg: "MODE", Usage: "how the control plane reaches a kubernetes sandbox's daemon: pod-ip (at its pod's IP, from inside the cluster) or port-forward (through the API server, from outside it)", Value: settings.String{P: &c.Providers.K8sDaemonVia, Check: settings.OneOf("pod-ip", "port-forward")}},
		{Name: "k8s-kubeconfig", Arg: "FILE", Usage: "a kubeconfig file (default: the in-cluster configuration)", Value: settings.String{P: &c.Providers.K8sKubeconfig, Check: settings.NonEmpty}},
		{Name: "k8s-runtime-class", Arg: "NAME", Usage: "the runtimeClassName of sandbox pods, e.g. gvisor on GKE Sandbox (default: the cluster's default runtime)", Value: settings.String{P: &c.Providers.K8sRuntimeClass, Check: settings.NonEmpty}},
		{Name: "k8s-run-as-root", Arg: "BOOL", Usage: "run sandbox containers as root with a few capabilities, for images that need root and split sessions (false: as k8s-run-as-user, with runAsNonRoot and no capability)", Value: settings.Bool{P: &c.Providers.K8sRunAsRoot}},
		{Name: "k8s-run-as-user", Arg: "UID", Usage: "the uid of sandbox containers unless k8s-run-as-root", Value: settings.Int{P: &c.Providers.K8sRunAsUser, Min: 1, Max: 1<<31 - 1}},
		{Name: "k8s-run-as-group", Arg: "GID", Usage: "the gid of sandbox containers unless k8s-run-as-root", Value: settings.Int{P: &c.Providers.K8sRunAsGroup, Min: 1, Max: 1<<31 - 1}},
		{Name: "k8s-cpu-request", Arg: "QUANTITY", Usage: "the CPU a sandbox container requests (0: none)", Value: settings.String{P: &c.Providers.K8sCPURequest, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-cpu-limit", Arg: "QUANTITY", Usage: "the CPU a sandbox container may use (0: no limit)", Value: settings.String{P: &c.Providers.K8sCPULimit, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-memory-request", Arg: "QUANTITY", Usage: "the memory a sandbox container requests (0: none)", Value: settings.String{P: &c.Providers.K8sMemoryRequest, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-memory-limit", Arg: "QUANTITY", Usage: "the memory a sandbox container may use; past it a process in it is OOM-killed (0: no limit)", Value: settings.String{P: &c.Providers.K8sMemoryLimit, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-ephemeral-storage-request", Arg: "QUANTITY", Usage: "the local disk a sandbox pod requests (0: none)", Value: settings.String{P: &c.Providers.K8sEphemeralStorageRequest, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-ephemeral-storage-limit", Arg: "QUANTITY", Usage: "the local disk a sandbox pod may fill (its writable layer, logs and workdir); past it the kubelet evicts the pod (0: no limit)", Value: settings.String{P: &c.Providers.K8sEphemeralStorageLimit, Check: kubernetes.CheckQuantity}},
		{Name: "k8s-max-lifetime", Arg: "DURATION", Usage: "the longest a sandbox pod runs (activeDeadlineSeconds); past it the pod is stopped and its sandbox reads failed (0s: no bound)", Value: settings.Duration{P: &c.Providers.K8sMaxLifetime, Min: 0, Max: 365 * 24 * time.Hour}},
		{Name: "e2b-api-key", Arg: "KEY", Usage: "E2B's API key; setting it offers the e2b provider", Value: settings.String{P: &c.Providers.E2BAPIKey, Check: settings.NonEmpty}},
		{Name: "e2b-api-url", Arg: "URL", Usage: "E2B's API", Value: settings.String{P: &c.Providers.E2BAPIURL, Check: settings.HTTPURL}},
		{Name: "e2b-domain", Arg: "DOMAIN", Usage: "the domain of E2B's sandbox daemons (49983-<id>.<domain>)", Value: settings.String{P: &c.Providers.E2BDomain, Check: settings.NonEmpty}},
		{Name: "e2b-templates", Arg: "LIST", Usage: "the templates of hangar's E2B API (/e2b): name=provider[:image] entries separated by commas, like base=docker:hangar-sandbox:latest,py=docker:python:3.12 (base defaults to the default provider's image)", Value: settings.String{P: &c.E2BTemplates, Check: e2bTemplates}},
		{Name: "e2b-template", Arg: "TEMPLATE", Usage: "the template of an e2b sandbox whose request names none", Value: settings.String{P: &c.Providers.E2BTemplate, Check: settings.NonEmpty}},
	}
}

// loadServeConfig reads `hangar serve`'s settings from the environment and args.
func loadServeConfig(args []string, getenv func(string) (string, bool), stdout io.Writer) (config.Config, error) {
	c := config.Default()
	err := settings.Parse("hangar serve", serveSummary, "HANGAR_", serveSettings(&c), args, getenv, stdout)
	return c, err
}

// The checks of serve's own values; the common ones are package settings'.

// postgresURL accepts what pgx accepts as a URL: postgres:// or postgresql:// with a host.
func postgresURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("must be a PostgreSQL URL, like postgres://user:password@localhost:5432/hangar")
	}
	return nil
}

// originURL is an http(s) URL with no path, query or fragment: what OAuth's issuer must be.
func originURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be an http:// or https:// URL with no path, like https://hangar.example.com")
	}
	return nil
}

// hostList is comma-separated hosts (host or host:port), or *.
func hostList(s string) error {
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ @?#") {
			return errors.New("must be hosts separated by commas, like clients.example.com,apps.example.org:8443, or *")
		}
	}
	return nil
}

func e2bTemplates(s string) error {
	_, err := e2bapi.ParseTemplates(s)
	return err
}

func prefixList(s string) error {
	if _, err := addrlimit.ParsePrefixes(s); err != nil {
		return errors.New("must be addresses or CIDR prefixes separated by commas, like 10.52.7.0/24,192.168.1.7")
	}
	return nil
}

func dockerHost(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("must be a Docker engine address, like unix:///var/run/docker.sock or tcp://127.0.0.1:2375")
	}
	return nil
}

// cpus is a decimal number of CPUs from 0 (no limit) to 1024, like 2 or 0.5.
func cpus(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1024 || f != f {
		return errors.New("must be a number of CPUs from 0 (no limit) to 1024, like 2 or 0.5")
	}
	return nil
}
