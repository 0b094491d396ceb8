// Package daemon is hangar's in-sandbox daemon (`hangar envd`): it runs commands and streams
// their output, serves the sandbox's files and watches directories, speaking the Connect RPC
// protocol of E2B's envd 0.6.x (process.Process, filesystem.Filesystem) plus envd's HTTP
// endpoints (/health, /init, /files), so that one client drives both daemons.
//
// Where it differs from envd: signals go to a process's whole process group; each subscriber
// to a process has its own queue bounded in bytes, so one slow client never stalls the process
// or the other clients (one that falls behind is ended with ErrSlowSubscriber); and a Start
// stream bounded by Connect-Timeout-Ms sends all the killed process's output before its
// deadline error. docs/envd.md lists every difference.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/envd/spec/filesystem/filesystemconnect"
	"github.com/hangar-dev/hangar/internal/envd/spec/process/processconnect"
	"github.com/hangar-dev/hangar/internal/h2"
	"github.com/hangar-dev/hangar/internal/shed"
)

// Config is the daemon's configuration. Every zero value has a working default.
type Config struct {
	// AccessToken, when set, must be sent as X-Access-Token with every request but GET /health.
	// Empty: no authentication until POST /init sets a token (as envd does), unless
	// AccessTokenSHA256 is set.
	AccessToken string
	// AccessTokenSHA256, when set (64 hex digits), is the SHA-256 of the token every request
	// but GET /health must send: a daemon started with it is never open, and its command
	// line, which the sandbox's commands can read, does not hold the token itself. A token set
	// by POST /init (which then needs this one) takes its place.
	AccessTokenSHA256 string
	// Workdir is the working directory of processes started without one, and what relative
	// file paths are resolved against. Empty: the home directory of the user a request runs as.
	Workdir string
	// DefaultUser is the user requests run as when they name none. Empty: the user the daemon
	// runs as.
	DefaultUser string
	// OwnHome is HOME for processes run as the daemon's own user (the local provider sets it
	// to the sandbox's folder, so a command's login shell does not read the host user's
	// profile). Empty: the user's home from the user database, as for any other user.
	OwnHome string
	// KeepaliveInterval is how long a stream may stay silent before a keepalive event when the
	// request has no Keepalive-Ping-Interval header. Zero: 90 seconds (envd's default).
	KeepaliveInterval time.Duration
	// SubscriberQueueBytes bounds the output waiting to be sent to one subscriber of a process
	// or a watch; a subscriber that falls further behind is ended with ErrSlowSubscriber. Zero:
	// 16 MiB.
	SubscriberQueueBytes int
	// StarterQueueBytes bounds the output waiting for the client that started a process
	// (Start). Past it the process's output waits (see StarterStall), so it bounds the
	// daemon's memory while a process writes faster than its client reads, without dropping
	// anything; it need only hold enough reads (32 KiB each) to keep the stream busy. Zero:
	// 1 MiB.
	StarterQueueBytes int
	// StarterStall: the client that started a process (Start) is its terminal. When its queue
	// is full the process's output waits for it — the process is slowed down, as by a slow
	// terminal — and only a starter that takes nothing for this long is ended
	// (ErrSlowSubscriber). Attached clients (Connect) never slow the process: a full queue ends
	// them at once. Zero: 60s.
	StarterStall time.Duration
	// EndedRetention is how long an ended process can still be found by Connect (which then
	// answers its start and end events). Zero: 30 seconds.
	EndedRetention time.Duration
	// KillGrace is how long, after a killed process's leader is reaped, the daemon waits for its
	// output pipes to close (a descendant that left the process group can hold them open)
	// before it closes them itself. Zero: 2 seconds.
	KillGrace time.Duration
	// MaxWatchers bounds the directory watches open at once (WatchDir streams and
	// CreateWatcher watchers). Zero: 64.
	MaxWatchers int
	// Logger receives the daemon's logs. Nil: logs are discarded.
	Logger *slog.Logger
	// Clock times the starter's stall (StarterStall), processes' lifetimes and kill graces,
	// keepalives and the retention of ended processes. Nil: the real clock.
	Clock quartz.Clock
	// Running, when set, is told how many processes run each time that number changes, under
	// the lock of the daemon's process table (so in order); it must not call the daemon. The
	// hangar-envd command sizes its soft memory limit with it.
	Running func(n int)
}

// Defaults used for zero Config fields.
const (
	DefaultKeepaliveInterval    = 90 * time.Second
	DefaultSubscriberQueueBytes = 16 << 20
	DefaultStarterQueueBytes    = 1 << 20
	DefaultEndedRetention       = 30 * time.Second
	DefaultKillGrace            = 2 * time.Second
	DefaultMaxWatchers          = 64
	// DefaultAddress is where envd listens inside a sandbox.
	DefaultAddress = "0.0.0.0:49983"
)

func (c Config) withDefaults() Config {
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.SubscriberQueueBytes <= 0 {
		c.SubscriberQueueBytes = DefaultSubscriberQueueBytes
	}
	if c.StarterQueueBytes <= 0 {
		c.StarterQueueBytes = DefaultStarterQueueBytes
	}
	if c.EndedRetention <= 0 {
		c.EndedRetention = DefaultEndedRetention
	}
	if c.StarterStall <= 0 {
		c.StarterStall = 60 * time.Second
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.MaxWatchers <= 0 {
		c.MaxWatchers = DefaultMaxWatchers
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = quartz.NewReal()
	}
	return c
}

// Daemon serves the envd protocol. Create it with New, serve it with Serve (or mount Handler),
// and Close it to kill the processes it started.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	auth  *authState
	procs *registry
	watch *watchers
	users userDB

	// base is cancelled by Close: every stream handler watches it, so that shutting the HTTP
	// server down does not wait for streams that never end by themselves.
	base       context.Context
	cancelBase context.CancelFunc

	handler http.Handler
}

// New returns a daemon with cfg; it starts nothing until it serves requests.
func New(cfg Config) *Daemon {
	cfg = cfg.withDefaults()
	base, cancel := context.WithCancel(context.Background())
	d := &Daemon{
		cfg:        cfg,
		log:        cfg.Logger,
		auth:       newAuthState(cfg),
		procs:      newRegistry(cfg.EndedRetention, cfg.Clock, cfg.Running),
		watch:      newWatchers(cfg.MaxWatchers),
		users:      systemUsers,
		base:       base,
		cancelBase: cancel,
	}
	// A panic in a handler answers that call with an internal error instead of dropping the
	// connection; the daemon goes on serving.
	recoverOpt := connect.WithRecover(func(_ context.Context, spec connect.Spec, _ http.Header, v any) error {
		d.log.Error("panic in a request handler", "procedure", spec.Procedure, "panic", fmt.Sprint(v))
		return connect.NewError(connect.CodeInternal, errors.New("the daemon failed while handling this request; see its log"))
	})
	mux := http.NewServeMux()
	// Events are small and sent one by one as they happen: gzipping each (which Connect does
	// by default when the client accepts it) costs more CPU and latency than it saves, so only
	// messages of a mebibyte or more are compressed.
	compressOpt := connect.WithCompressMinBytes(1 << 20)
	mux.Handle(processconnect.NewProcessHandler(&processService{d: d}, recoverOpt, compressOpt))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{d: d}, recoverOpt, compressOpt))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		// Tells hangar's client that this daemon is hangar's, so it speaks h2c to it (the
		// client package's HangarHeader; E2B's envd serves only HTTP/1.1 in cleartext).
		w.Header().Set("Hangar-Envd", "1")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /init", d.handleInit)
	mux.HandleFunc("GET /files", d.handleDownload)
	mux.HandleFunc("POST /files", d.handleUpload)
	d.handler = d.authenticate(liftLifetime(mux))
	return d
}

// Handler is the daemon's HTTP handler (Connect RPC and envd's HTTP endpoints).
func (d *Daemon) Handler() http.Handler { return d.handler }

// Close ends every open stream and kills every process the daemon started (their whole
// process groups), waiting until they are reaped, and removes every watcher.
func (d *Daemon) Close() {
	d.cancelBase()
	d.procs.killAll()
	d.watch.closeAll()
}

// Check reports whether the daemon can serve requests: its default user exists and its
// working directory, when set, is a directory. The daemon's own user always exists (without
// an entry in the user database it is its uid with HOME=/).
func (d *Daemon) Check() error {
	s := d.auth.get()
	if _, err := d.users.lookupIdentity(s.defaultUser); err != nil {
		return fmt.Errorf("envd cannot run requests as its default user: %w", err)
	}
	if s.workdir == "" {
		return nil
	}
	if fi, err := os.Stat(s.workdir); err != nil || !fi.IsDir() {
		return fmt.Errorf("envd's working directory %q does not exist or is not a directory", s.workdir)
	}
	return nil
}

// shutdownTimeout bounds how long Serve waits for in-flight unary requests once its context
// is done; streams are ended at once.
const shutdownTimeout = 5 * time.Second

// Serve serves HTTP/1.1 and h2c (HTTP/2 without TLS) on ln until ctx is done, then closes the
// listener, ends every stream, kills the daemon's processes and returns nil. It first checks
// that requests can run (Check) and returns that error without serving when they cannot, so
// a daemon that would fail every request exits at once and its sandbox is seen as failed
// rather than running. Otherwise it returns an error only when serving fails.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	if err := d.Check(); err != nil {
		ln.Close()
		d.Close()
		return err
	}
	srv := &http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return d.base },
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	// h2c is served by hangar's own HTTP/2 server, whose handlers write to the connection
	// themselves (internal/h2 says why).
	new(h2.Server).Configure(srv)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		d.Close()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	})
	// The body is a Connect error whose message starts as envd's client expects of a daemon
	// out of a resource ("the daemon is out of <what>: ...").
	err := srv.Serve(shed.NewListener(ln, d.log, `{"code":"unavailable","message":"the daemon is out of file descriptors: it could not accept a connection"}`))
	close(done)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	d.Close()
	return fmt.Errorf("serve envd: %w", err)
}

// Listen listens on addr: "host:port" for TCP (port 0 picks a free port) or "unix:/path" for
// a unix socket (a stale socket file at path is replaced).
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		path = strings.TrimPrefix(path, "//") // accept unix:///path as well
		if path == "" {
			return nil, fmt.Errorf("listen %q: a unix socket address needs a path, e.g. unix:/run/envd.sock", addr)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("listen %q: remove stale socket: %w", addr, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("listen %q: %w", addr, err)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %q: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	return ln, nil
}

// Address is the address ln is bound to, in the form Listen takes: "127.0.0.1:43121" or
// "unix:/path/to/sock".
func Address(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "unix:" + ln.Addr().String()
	}
	return ln.Addr().String()
}
