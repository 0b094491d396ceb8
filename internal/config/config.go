// Package config holds the values `hangar serve` can be told and their documented defaults:
// values only. Each field is set by one setting (a flag and its HANGAR_* variable), bound to it
// in cmd/hangar's serveconfig.go and read with internal/settings; every other package takes
// the part of Config it needs.
package config

import "time"

// Config is everything `hangar serve` can be told. The zero value is not useful: start from
// Default and override.
type Config struct {
	// Listen is the address of the one listener serving /api, /mcp, /healthz, /readyz and
	// /metrics. Default 127.0.0.1:8080.
	Listen string
	// DataDir holds the SQLite database, the admin token file and local sandboxes.
	// Default ./.hangar.
	DataDir string
	// DatabaseURL, when set, selects PostgreSQL (postgres://...) instead of SQLite. Default "".
	DatabaseURL string
	// DatabaseMaxConns caps this hangar's connections to its database, in use and idle
	// (sqlstore.Pool.MaxConns); with PostgreSQL each replica also keeps replicas.MaxConns of its
	// own. Default 7.
	DatabaseMaxConns int
	// DatabaseWait bounds how long a request waits for one of those connections when all are
	// in use; past it, 503 with Retry-After. Default 5s.
	DatabaseWait time.Duration
	// TokensFile, when set, lists static tokens, one per line. Default "".
	TokensFile string
	// TokensMaxPerUser bounds one user's live tokens and OAuth grants (auth.Config.MaxPerUser).
	// Default 100.
	TokensMaxPerUser int
	// LogFormat is text or json. Default text.
	LogFormat string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// ShutdownGrace is how long in-flight requests may take to finish after SIGTERM or SIGINT.
	// Default 30s.
	ShutdownGrace time.Duration
	// MaxBodyBytes caps every request body; a larger one is refused with 413. Default 1 MiB.
	MaxBodyBytes int64
	// GCHeadroom is how much the heap may grow past what the last collection found live
	// before the garbage collector runs again (limits.KeepHeadroom; 0: GOGC alone). Default
	// 64 MiB.
	GCHeadroom int64
	// BodyTimeout is how long a request body may take to arrive, beyond a second for every
	// BodyMinRate bytes that arrived; past it, 408 and the connection is closed. Default 30s.
	BodyTimeout time.Duration
	// BodyMinRate is the rate, in bytes per second, that earns a slow body more time than
	// BodyTimeout. Default 64 KiB.
	BodyMinRate int64
	// TrustedProxies lists, comma-separated, the addresses and CIDR prefixes of the proxies
	// whose X-Forwarded-For names the client address that per-address limits count. Default
	// "": none, the connection's peer is the client.
	TrustedProxies string
	// MetricsListen, when set, serves /metrics on its own listener (a port Prometheus reaches
	// and the public does not), and no longer on Listen. Default "": /metrics on Listen.
	MetricsListen string
	// PprofListen, when set, serves Go's profiler (net/http/pprof) on its own listener, for
	// profiling; keep it on loopback. Default "": off.
	PprofListen string
	// Secret keys the MACs in background processes' daemon tags; it must stay the same across
	// restarts for processes to be found again. Default "": 32 random bytes kept in
	// <data dir>/secret.
	Secret string
	// PublicURL is the URL clients reach hangar at (https://hangar.example.com, no path).
	// Setting it serves OAuth for MCP clients: the issuer is this URL and the resource
	// PublicURL+"/mcp". Default "": no OAuth, only pasted tokens.
	PublicURL string

	OAuth     OAuth
	Stream    Stream
	Providers Providers
	// E2BTemplates maps the E2B API's template ids (/e2b, E2B's SDK's Sandbox.create(template))
	// to providers and images: comma-separated name=provider[:image] entries
	// (base=docker:hangar-sandbox:latest). Default "": base only, the default provider's
	// default image.
	E2BTemplates string
	MCP          MCP
	Turns        Turns
	Replicas     Replicas

	// StuckAfter is how long a running agent may record nothing before the Fleet (the page,
	// hangar fleet, the inbox, hangar sessions ls) calls it stuck. Default 10m.
	StuckAfter time.Duration
}

// Replicas configures several `hangar serve` on one PostgreSQL (docs/replicas.md). Unused with
// SQLite.
type Replicas struct {
	// AdvertiseURL is where the other replicas reach this one (http://host:port), to forward
	// requests about the sandboxes it owns. Default "": http://<listen address>, with the
	// machine's hostname when it listens on every interface.
	AdvertiseURL string
	// LeaseSeconds is how long a replica owns a sandbox's followers without renewing its
	// lease: the takeover bound for a replica cut off with its database connections left open
	// (a killed one is seen dead within a second by its presence lock). Default 15.
	LeaseSeconds int
}

// OAuth configures hangar's authorization server for MCP clients (with PublicURL).
type OAuth struct {
	// ClientIDHosts lists, comma-separated, the hosts whose https URLs are accepted as
	// client ids (Client ID Metadata Documents, fetched by hangar); "*" any host. Default "":
	// none, clients register dynamically.
	ClientIDHosts string
	// AccessTokenTTL is how long an OAuth access token lives. Default 1h.
	AccessTokenTTL time.Duration
	// RegisterPerMinute bounds open client registrations per client address. Default 10.
	RegisterPerMinute int
	// ConsentPerMinute bounds the consent form's posts per client address. Default 30.
	ConsentPerMinute int
}

// MCP bounds the 2025-era MCP sessions (initialize, Mcp-Session-Id) on /mcp.
type MCP struct {
	// SessionIdleSeconds closes a session that has had no request for this long. Default
	// 1800 (30 minutes).
	SessionIdleSeconds int
	// SessionsPerToken is how many sessions one token may hold open. Default 32.
	SessionsPerToken int
}

// Providers configures where sandboxes live. local (unless Local is false) and docker are always offered; kubernetes
// when K8sNamespace is set, e2b when E2BAPIKey is set.
type Providers struct {
	// Default is the provider of a sandbox whose request names none. Default local.
	Default string
	// Local offers the local provider, whose sandboxes are folders on this machine running
	// commands as this user: they isolate nothing, so a shared deployment (the Helm chart)
	// turns it off. Default true.
	Local bool
	// DaemonBinary is hangar-envd, run as local sandboxes' daemon and mounted into docker
	// sandboxes (so it must be static: make build makes it so), the turn harness too. Default
	// "": hangar-envd beside this executable, else this executable (its envd and harness verbs).
	DaemonBinary string
	// DockerHost is the Docker engine's address. Default unix:///var/run/docker.sock.
	DockerHost string
	// DockerImage is the image of a docker sandbox whose request names none. Default
	// ubuntu:24.04 (never pulled: it must be on the engine).
	DockerImage string
	// DockerMemoryBytes is a docker sandbox's memory limit (swap included: no more swap).
	// Default 2 GiB.
	DockerMemoryBytes int64
	// DockerCPUs is how many CPUs a docker sandbox may use, as a decimal ("1.5"); "0": no
	// limit. Default "2".
	DockerCPUs string
	// DockerDiskBytes bounds a docker sandbox's writable layer (--storage-opt size), which few
	// engines can do. Default 0: no bound.
	DockerDiskBytes int64
	// DockerPids is how many processes (threads included) a docker sandbox may have at once;
	// 0: no limit. Default 1024.
	DockerPids int
	// K8sNamespace is where kubernetes sandboxes' pods go; setting it offers the provider.
	// Default "" (not offered).
	K8sNamespace string
	// K8sImage is the image of a kubernetes sandbox whose request names none. Default
	// ubuntu:24.04.
	K8sImage string
	// K8sHangarImage is an image holding hangar-envd at /usr/local/bin/hangar-envd, copied into
	// each pod by an init container. Default "": the provider's, ghcr.io/hangar-dev/hangar:latest.
	K8sHangarImage string
	// K8sKubeconfig is a kubeconfig file. Default "": the in-cluster configuration.
	K8sKubeconfig string
	// K8sRuntimeClass is the runtimeClassName of sandbox pods (gvisor on GKE Sandbox). Default
	// "": the cluster's default runtime.
	K8sRuntimeClass string
	// K8sRunAsRoot runs sandbox containers as root, with a few capabilities (images that need
	// root, split sessions). Default false: as K8sRunAsUser:K8sRunAsGroup, runAsNonRoot, no
	// capability.
	K8sRunAsRoot bool
	// K8sRunAsUser and K8sRunAsGroup are sandbox containers' uid and gid. Default 1000.
	K8sRunAsUser, K8sRunAsGroup int
	// K8sCPURequest ... K8sEphemeralStorageLimit are sandbox containers' requests and limits,
	// Kubernetes quantities ("0": none). Defaults 100m/2 CPU, 256Mi/2Gi memory, 1Gi/10Gi
	// ephemeral storage.
	K8sCPURequest, K8sCPULimit                           string
	K8sMemoryRequest, K8sMemoryLimit                     string
	K8sEphemeralStorageRequest, K8sEphemeralStorageLimit string
	// K8sMaxLifetime is the longest a sandbox pod runs (activeDeadlineSeconds); 0: no bound.
	// Default 24h.
	K8sMaxLifetime time.Duration
	// K8sDaemonVia is how the control plane reaches a kubernetes sandbox's daemon: pod-ip (at
	// the pod's IP: a control plane in the cluster) or port-forward (through the API server's
	// port-forward: a control plane outside it). Default pod-ip.
	K8sDaemonVia string
	// E2BAPIKey is E2B's API key; setting it offers the provider. Default "" (not offered).
	E2BAPIKey string
	// E2BAPIURL is E2B's API. Default https://api.e2b.app.
	E2BAPIURL string
	// E2BDomain is where E2B's sandboxes' daemons are reached (49983-<id>.<domain>). Default
	// e2b.app.
	E2BDomain string
	// E2BTemplate is the template of an e2b sandbox whose request names none. Default base.
	E2BTemplate string
}

// Stream holds the limits of spec/streaming.md's "Limits and closing" table, with its names and
// defaults.
type Stream struct {
	// MaxPerToken is how many streams one token may hold open; the tokens one OAuth grant
	// issued count as one. Default 16.
	MaxPerToken int
	// MaxPerUser is how many streams one user may hold open through all its tokens, across
	// replicas. Default 128 (a quarter of MaxTotal).
	MaxPerUser int
	// MaxTotal is how many streams may be open in all, hangar's own included. Default 512.
	MaxTotal int
	// BytesPerSecond paces each stream; every message also counts 64 bytes. Default 1 MiB.
	BytesPerSecond int64
	// MaxBytes caps what one stream sends. Default 64 MiB.
	MaxBytes int64
	// BackgroundMaxPerToken is how many background processes one token may have running; the
	// tokens one OAuth grant issued count as one. Default 16.
	BackgroundMaxPerToken int
	// BackgroundMaxPerUser is how many background processes one user may have running through
	// all its tokens, across replicas. Default 64.
	BackgroundMaxPerUser int
	// WatchMaxPerToken is how many directory watches one token may hold (REST streams and MCP
	// subscriptions). Default 8.
	WatchMaxPerToken int
	// MaxHours ends event, watch and fleet streams (and MCP subscriptions) open longer.
	// Default 12.
	MaxHours int
	// RecheckSeconds is how often open streams check that their token is still valid. Default 5.
	RecheckSeconds int
	// QueueBytes bounds what may wait in one stream's queue for its client: output that
	// outruns the pace (or a client) by more ends the stream (limit, or slow). Default 16 MiB.
	QueueBytes int64
}

// Turns configures sessions' turns: how their run logs are read and how long events are kept.
type Turns struct {
	// PollSeconds is how often a running turn's run log is read when it is not followed
	// (session_poll_seconds). Default 5.
	PollSeconds int
	// FollowLogs follows running turns' logs through the daemon (HANGAR_STREAM_TURN_LOGS).
	// Default true.
	FollowLogs bool
	// EventRetentionDays is how long sessions' and jobs' events are kept; 0 keeps them.
	// Default 30.
	EventRetentionDays int
}

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Listen:           "127.0.0.1:8080",
		DataDir:          "./.hangar",
		LogFormat:        "text",
		LogLevel:         "info",
		ShutdownGrace:    30 * time.Second,
		MaxBodyBytes:     1 << 20,
		GCHeadroom:       64 << 20,
		BodyTimeout:      30 * time.Second,
		BodyMinRate:      64 << 10,
		TokensMaxPerUser: 100,
		DatabaseMaxConns: 7,
		DatabaseWait:     5 * time.Second,
		Turns:            Turns{PollSeconds: 5, FollowLogs: true, EventRetentionDays: 30},
		StuckAfter:       10 * time.Minute,
		Stream: Stream{
			MaxPerToken:           16,
			MaxPerUser:            128,
			MaxTotal:              512,
			BytesPerSecond:        1 << 20,
			MaxBytes:              64 << 20,
			BackgroundMaxPerToken: 16,
			BackgroundMaxPerUser:  64,
			WatchMaxPerToken:      8,
			MaxHours:              12,
			RecheckSeconds:        5,
			QueueBytes:            16 << 20,
		},
		MCP:      MCP{SessionIdleSeconds: 1800, SessionsPerToken: 32},
		OAuth:    OAuth{AccessTokenTTL: time.Hour, RegisterPerMinute: 10, ConsentPerMinute: 30},
		Replicas: Replicas{LeaseSeconds: 15},
		Providers: Providers{
			Default:           "local",
			Local:             true,
			DockerHost:        "unix:///var/run/docker.sock",
			DockerImage:       "ubuntu:24.04",
			DockerMemoryBytes: 2 << 30,
			DockerCPUs:        "2",
			DockerPids:        1024,
			K8sImage:          "ubuntu:24.04",
			K8sDaemonVia:      "pod-ip",
			K8sRunAsUser:      1000,
			K8sRunAsGroup:     1000,
			K8sCPURequest:     "100m", K8sCPULimit: "2",
			K8sMemoryRequest: "256Mi", K8sMemoryLimit: "2Gi",
			K8sEphemeralStorageRequest: "1Gi", K8sEphemeralStorageLimit: "10Gi",
			K8sMaxLifetime: 24 * time.Hour,
			E2BAPIURL:      "https://api.e2b.app",
			E2BDomain:      "e2b.app",
			E2BTemplate:    "base",
		},
	}
}
