package main

import (
	"io"
	"time"

	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/provider/kubernetes"
)

const serveSummary = "Runs the control plane: REST (/api), MCP (/mcp), /healthz, /readyz and /metrics on one listener."

// serveSettings binds every setting of `hangar serve` to its field in c.
func serveSettings(c *config.Config) []setting {
	return []setting{
		{"listen", "ADDR", "address of the one listener (host:port)", stringValue{&c.Listen, hostPort}},
		{"data-dir", "DIR", "where the SQLite database, the admin token file and local sandboxes live", stringValue{&c.DataDir, nonEmpty}},
		{"database-url", "URL", "PostgreSQL to use instead of SQLite (postgres://user:password@host:5432/db)", stringValue{&c.DatabaseURL, postgresURL}},
		{"database-max-conns", "N", "connections this hangar may hold open to its database, in use and idle (with PostgreSQL each replica keeps 3 more for leases and notifications)", intValue{&c.DatabaseMaxConns, 1, 10_000}},
		{"database-wait", "DURATION", "how long a request waits for a database connection when all are in use (past it: 503 with Retry-After)", durationValue{&c.DatabaseWait, time.Millisecond, time.Hour}},
		{"tokens-file", "FILE", "static tokens, one per line: TOKEN USER SCOPES [SANDBOX]", stringValue{&c.TokensFile, nonEmpty}},
		{"tokens-max-per-user", "N", "live tokens and OAuth grants one user may hold (expired and revoked ones do not count; static tokens neither)", intValue{&c.TokensMaxPerUser, 1, 1_000_000}},
		{"log-format", "FORMAT", "text or json", stringValue{&c.LogFormat, oneOf("text", "json")}},
		{"log-level", "LEVEL", "debug, info, warn or error", stringValue{&c.LogLevel, oneOf("debug", "info", "warn", "error")}},
		{"shutdown-grace", "DURATION", "how long in-flight requests may take to finish on SIGTERM/SIGINT", durationValue{&c.ShutdownGrace, time.Millisecond, time.Hour}},
		{"max-body-bytes", "BYTES", "the largest request body accepted (larger: 413)", sizeValue{&c.MaxBodyBytes, 1 << 10, 1 << 30}},
		{"body-timeout", "DURATION", "how long a request body may take to arrive, plus a second per body-min-bytes-per-second bytes that arrived (past it: 408)", durationValue{&c.BodyTimeout, time.Second, time.Hour}},
		{"body-min-bytes-per-second", "BYTES", "the rate that earns a slow request body (a large upload) time beyond body-timeout", sizeValue{&c.BodyMinRate, 1, 1 << 30}},
		{"trusted-proxies", "CIDRS", "comma-separated addresses or CIDR prefixes of the proxies whose X-Forwarded-For names the client that per-address limits count (default: none, the connection's peer)", stringValue{&c.TrustedProxies, prefixList}},
		{"pprof-listen", "ADDR", "serve Go's profiler (/debug/pprof/) on this separate address; keep it on loopback", stringValue{&c.PprofListen, hostPort}},
		{"public-url", "URL", "the URL clients reach hangar at (https://hangar.example.com); setting it serves OAuth for MCP clients", stringValue{&c.PublicURL, originURL}},
		{"oauth-client-id-hosts", "HOSTS", "comma-separated hosts whose https URLs MCP clients may use as client ids (metadata documents); * for any", stringValue{&c.OAuth.ClientIDHosts, hostList}},
		{"oauth-access-token-ttl", "DURATION", "how long an OAuth access token lives (a refresh makes another)", durationValue{&c.OAuth.AccessTokenTTL, time.Minute, 24 * time.Hour}},
		{"oauth-register-per-minute", "N", "open OAuth client registrations per client address per minute (past it: 429)", intValue{&c.OAuth.RegisterPerMinute, 1, 100_000}},
		{"oauth-consent-per-minute", "N", "posts of the OAuth consent form per client address per minute (past it: 429)", intValue{&c.OAuth.ConsentPerMinute, 1, 100_000}},
		{"secret", "SECRET", "at least 32 characters keying background processes' tags and sealing sessions' env; the same on every replica (default: random, kept in <data dir>/secret)", stringValue{&c.Secret, minLen(32)}},
		{"stream-max-per-token", "N", "open streams per token, of every kind: execs, attaches, events, watches, the fleet, MCP subscriptions", intValue{&c.Stream.MaxPerToken, 1, 100_000}},
		{"stream-max-per-user", "N", "open streams per user, through all its tokens and across replicas", intValue{&c.Stream.MaxPerUser, 1, 1_000_000}},
		{"stream-max-total", "N", "open streams in all, hangar's own included", intValue{&c.Stream.MaxTotal, 1, 1_000_000}},
		{"stream-bytes-per-second", "BYTES", "pace of each stream; every message also counts 64 bytes", sizeValue{&c.Stream.BytesPerSecond, 1 << 10, 1 << 40}},
		{"stream-max-bytes", "BYTES", "bytes one stream may send; past it nothing more is sent", sizeValue{&c.Stream.MaxBytes, 1 << 10, 1 << 40}},
		{"background-max-per-token", "N", "running background processes per token (an OAuth grant's tokens count as one)", intValue{&c.Stream.BackgroundMaxPerToken, 1, 10_000}},
		{"background-max-per-user", "N", "running background processes per user, through all its tokens and across replicas", intValue{&c.Stream.BackgroundMaxPerUser, 1, 100_000}},
		{"stream-max-hours", "N", "an event, watch or fleet stream (or MCP subscription) open longer is closed", intValue{&c.Stream.MaxHours, 1, 24 * 365}},
		{"watch-max-per-token", "N", "directory watches per token: REST watch streams and MCP subscriptions", intValue{&c.Stream.WatchMaxPerToken, 1, 10_000}},
		{"stream-recheck-seconds", "N", "how often open streams check that their token is still valid", intValue{&c.Stream.RecheckSeconds, 1, 3600}},
		{"stream-queue-bytes", "BYTES", "what may wait in one stream's queue; past it a streamed command is held back to the pace", sizeValue{&c.Stream.QueueBytes, 64 << 10, 1 << 30}},
		{"mcp-session-idle-seconds", "N", "a 2025-era MCP session with no request for this long is closed", intValue{&c.MCP.SessionIdleSeconds, 1, 7 * 24 * 3600}},
		{"mcp-sessions-per-token", "N", "2025-era MCP sessions one token may hold open (one more initialize: 429)", intValue{&c.MCP.SessionsPerToken, 1, 100_000}},
		{"session-poll-seconds", "N", "how often a running turn's run log is read when it is not followed", intValue{&c.Turns.PollSeconds, 1, 3600}},
		{"stream-turn-logs", "BOOL", "follow running turns' logs through the daemon (false: polling only)", boolValue{&c.Turns.FollowLogs}},
		{"event-retention-days", "N", "how long sessions' and jobs' events are kept (0: kept for good)", intValue{&c.Turns.EventRetentionDays, 0, 36500}},
		{"advertise-url", "URL", "with PostgreSQL: where the other replicas reach this one (default: http://<listen address>, the hostname when it listens on all interfaces)", stringValue{&c.Replicas.AdvertiseURL, httpURL}},
		{"lease-seconds", "N", "with PostgreSQL: how long a replica owns a sandbox's followers without renewing its lease (the takeover bound for a replica cut off with its connections open; a killed one is seen dead within a second)", intValue{&c.Replicas.LeaseSeconds, 1, 3600}},
		{"default-provider", "NAME", "the provider of a sandbox whose request names none: local, docker, kubernetes or e2b", stringValue{&c.Providers.Default, oneOf("local", "docker", "kubernetes", "e2b")}},
		{"local-provider", "BOOL", "offer the local provider, whose sandboxes run commands as this user on this machine and isolate nothing (false in a shared deployment)", boolValue{&c.Providers.Local}},
		{"daemon-binary", "FILE", "the static hangar-envd that sandboxes run as their daemon and turn harness (default: hangar-envd beside this executable, else this executable)", stringValue{&c.Providers.DaemonBinary, nonEmpty}},
		{"docker-host", "URL", "the Docker engine's address", stringValue{&c.Providers.DockerHost, dockerHost}},
		{"docker-image", "IMAGE", "the image of a docker sandbox whose request names none (never pulled)", stringValue{&c.Providers.DockerImage, nonEmpty}},
		{"docker-memory", "BYTES", "a docker sandbox's memory limit, swap included (past it the kernel's OOM killer ends a process in it)", sizeValue{&c.Providers.DockerMemoryBytes, 6 << 20, 1 << 40}},
		{"docker-cpus", "N", "how many CPUs a docker sandbox may use, like 2 or 0.5 (0: no limit)", stringValue{&c.Providers.DockerCPUs, cpus}},
		{"docker-pids", "N", "how many processes and threads a docker sandbox may have at once; one more fork fails (0: no limit)", intValue{&c.Providers.DockerPids, 0, 1 << 22}},
		{"docker-disk", "BYTES", "a docker sandbox's disk (its writable layer); only engines on overlay2 over xfs with pquota (or devicemapper, btrfs, zfs) can bound it (0: no bound)", optionalSize{sizeValue{&c.Providers.DockerDiskBytes, 1 << 20, 1 << 50}}},
		{"k8s-namespace", "NAMESPACE", "the namespace of kubernetes sandboxes' pods; setting it offers the kubernetes provider", stringValue{&c.Providers.K8sNamespace, nonEmpty}},
		{"k8s-image", "IMAGE", "the image of a kubernetes sandbox whose request names none", stringValue{&c.Providers.K8sImage, nonEmpty}},
		{"k8s-hangar-image", "IMAGE", "an image with hangar-envd at /usr/local/bin/hangar-envd, which an init container runs as `hangar-envd install` to copy it into each pod (default: ghcr.io/hangar-dev/hangar:latest)", stringValue{&c.Providers.K8sHangarImage, nonEmpty}},
		{"k8s-daemon-via", "MODE", "how the control plane reaches a kubernetes sandbox's daemon: pod-ip (at its pod's IP, from inside the cluster) or port-forward (through the API server, from outside it)", stringValue{&c.Providers.K8sDaemonVia, oneOf("pod-ip", "port-forward")}},
		{"k8s-kubeconfig", "FILE", "a kubeconfig file (default: the in-cluster configuration)", stringValue{&c.Providers.K8sKubeconfig, nonEmpty}},
		{"k8s-runtime-class", "NAME", "the runtimeClassName of sandbox pods, e.g. gvisor on GKE Sandbox (default: the cluster's default runtime)", stringValue{&c.Providers.K8sRuntimeClass, nonEmpty}},
		{"k8s-run-as-root", "BOOL", "run sandbox containers as root with a few capabilities, for images that need root and split sessions (false: as k8s-run-as-user, with runAsNonRoot and no capability)", boolValue{&c.Providers.K8sRunAsRoot}},
		{"k8s-run-as-user", "UID", "the uid of sandbox containers unless k8s-run-as-root", intValue{&c.Providers.K8sRunAsUser, 1, 1<<31 - 1}},
		{"k8s-run-as-group", "GID", "the gid of sandbox containers unless k8s-run-as-root", intValue{&c.Providers.K8sRunAsGroup, 1, 1<<31 - 1}},
		{"k8s-cpu-request", "QUANTITY", "the CPU a sandbox container requests (0: none)", stringValue{&c.Providers.K8sCPURequest, kubernetes.CheckQuantity}},
		{"k8s-cpu-limit", "QUANTITY", "the CPU a sandbox container may use (0: no limit)", stringValue{&c.Providers.K8sCPULimit, kubernetes.CheckQuantity}},
		{"k8s-memory-request", "QUANTITY", "the memory a sandbox container requests (0: none)", stringValue{&c.Providers.K8sMemoryRequest, kubernetes.CheckQuantity}},
		{"k8s-memory-limit", "QUANTITY", "the memory a sandbox container may use; past it a process in it is OOM-killed (0: no limit)", stringValue{&c.Providers.K8sMemoryLimit, kubernetes.CheckQuantity}},
		{"k8s-ephemeral-storage-request", "QUANTITY", "the local disk a sandbox pod requests (0: none)", stringValue{&c.Providers.K8sEphemeralStorageRequest, kubernetes.CheckQuantity}},
		{"k8s-ephemeral-storage-limit", "QUANTITY", "the local disk a sandbox pod may fill (its writable layer, logs and workdir); past it the kubelet evicts the pod (0: no limit)", stringValue{&c.Providers.K8sEphemeralStorageLimit, kubernetes.CheckQuantity}},
		{"k8s-max-lifetime", "DURATION", "the longest a sandbox pod runs (activeDeadlineSeconds); past it the pod is stopped and its sandbox reads failed (0s: no bound)", durationValue{&c.Providers.K8sMaxLifetime, 0, 365 * 24 * time.Hour}},
		{"e2b-api-key", "KEY", "E2B's API key; setting it offers the e2b provider", stringValue{&c.Providers.E2BAPIKey, nonEmpty}},
		{"e2b-api-url", "URL", "E2B's API", stringValue{&c.Providers.E2BAPIURL, httpURL}},
		{"e2b-domain", "DOMAIN", "the domain of E2B's sandbox daemons (49983-<id>.<domain>)", stringValue{&c.Providers.E2BDomain, nonEmpty}},
		{"e2b-template", "TEMPLATE", "the template of an e2b sandbox whose request names none", stringValue{&c.Providers.E2BTemplate, nonEmpty}},
	}
}

// loadServeConfig reads `hangar serve`'s settings from the environment and args.
func loadServeConfig(args []string, getenv func(string) (string, bool), stdout io.Writer) (config.Config, error) {
	c := config.Default()
	err := parseSettings("hangar serve", serveSummary, "HANGAR_", serveSettings(&c), args, getenv, stdout)
	return c, err
}
