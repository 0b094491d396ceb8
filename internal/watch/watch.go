// Package watch watches directories in sandboxes through their daemons (envd's WatchDir,
// inotify) for the clients that ask: one daemon watch per sandbox, directory and depth, shared
// by all who watch it and stopped when the last one leaves. It keeps each watch's latest
// events, numbered, so a reader can ask for just the new ones, and opens them as streams
// (kind watch) that a transport renders.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/limits"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
)

// Errors, to be tested with errors.Is; each says what it means to a client.
var (
	// ErrInvalid: the path is empty, not there, or not a directory.
	ErrInvalid error = &problem.Sentinel{Text: "invalid watch", Code: problem.CodeBadRequest, Message: "The watch request is not valid."}
	// ErrNeedsDaemon: the sandbox has no daemon to watch with.
	ErrNeedsDaemon error = &problem.Sentinel{Text: "watching a directory needs the sandbox's daemon", Code: problem.CodeConflict,
		Message: "Watching a directory needs the sandbox's daemon, which it does not have."}
	// ErrDaemonLimit: the sandbox's daemon holds as many watches as it allows.
	ErrDaemonLimit error = &problem.Sentinel{Text: "the sandbox's daemon watches as many directories as it allows", Code: problem.CodeLimit,
		Message: "The sandbox's daemon watches as many directories as it allows; end a watch first."}
)

// LimitSetting names the per-token limit of watches in a refusal.
const LimitSetting = "HANGAR_WATCH_MAX_PER_TOKEN"

// Config configures a Service.
type Config struct {
	// Sandboxes resolves sandboxes and their daemons. Required.
	Sandboxes *sandbox.Manager
	// Streams admits watch streams. Required for Stream.
	Streams *stream.Registry
	// MaxPerToken is how many watches one token may hold open (streams and subscriptions).
	// Default 8.
	MaxPerToken int
	// Keep is how many events a watch keeps for readers. Default 200.
	Keep int
	// Clock stamps events. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Shared, with several replicas on one database, counts each token's watches across them
	// all, so MaxPerToken holds for the whole service. Nil: counted here only.
	Shared stream.SharedCounts
}

// Event is one change under a watched directory.
type Event struct {
	Seq  int64
	TS   time.Time
	Name string // relative to the watched directory
	Type string // create, write, remove, rename or chmod
}

// Wire is the event as a client sees it: a change, in a page and on a live stream alike.
func (e Event) Wire() wire.Change {
	return wire.Change{Seq: e.Seq, TS: wire.Time(e.TS), Name: e.Name, Type: e.Type}
}

// MarshalJSON writes the event as its wire.Change: what a live stream sends.
func (e Event) MarshalJSON() ([]byte, error) { return json.Marshal(e.Wire()) }

// Service holds the open watches. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex // guards shared, perToken and closed
	shared   map[key]*shared
	perToken map[string]int
	closed   bool

	ctx    context.Context // the root of every daemon watch; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup // daemon readers and stream feeders
}

// key is what makes two watches one: the same sandbox instance (a re-created sandbox of the
// same name is another), directory and depth.
type key struct {
	sandbox   string
	created   time.Time
	dir       string
	recursive bool
}

// New returns a Service. Close it when the server stops.
func New(cfg Config) *Service {
	if cfg.MaxPerToken <= 0 {
		cfg.MaxPerToken = 8
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 200
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger, shared: map[key]*shared{}, perToken: map[string]int{}, ctx: ctx, cancel: cancel}
}

// Close stops every daemon watch and waits for the goroutines; open streams end (shutdown).
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Watch is one client's hold on a shared daemon watch. Close it when done.
type Watch struct {
	s      *Service
	sh     *shared
	tok    string // what it counts under (holderOf)
	once   sync.Once
	shared bool // counted in Config.Shared too: Close gives it back there

	// Sandbox and Dir are what is watched: the sandbox's name and the absolute directory.
	Sandbox, Dir string
	Recursive    bool
}

// Open starts watching dir (absolute, or relative to the sandbox's workdir) in the sandbox
// ref that p may use, or joins the watch already there. It returns once the daemon's watch is
// in place, or says why it cannot be: the sandbox is not p's (sandbox.ErrNotFound), has no
// daemon, the path is not a directory, or p holds MaxPerToken watches already.
func (s *Service) Open(ctx context.Context, p auth.Principal, ref, dir string, recursive bool) (*Watch, error) {
	k, sb, err := s.resolve(ctx, p, ref, dir, recursive)
	if err != nil {
		return nil, err
	}
	holder := holderOf(p)
	taken, err := s.takeShared(ctx, holder)
	if err != nil {
		return nil, err
	}
	sh, err := s.join(holder, k, sb)
	if err != nil {
		if taken {
			s.cfg.Shared.Give(sharedKey(holder))
		}
		return nil, err
	}
	w := &Watch{s: s, sh: sh, tok: holder, shared: taken, Sandbox: sb.Name, Dir: k.dir, Recursive: recursive}
	select {
	case <-sh.started:
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	}
	if sh.startErr != nil {
		w.Close()
		return nil, sh.startErr
	}
	return w, nil
}

// join counts a hold of tok on k's shared watch, starting the watch when it is the first.
func (s *Service) join(tok string, k key, sb store.Sandbox) (*shared, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, stream.ErrShuttingDown
	}
	if tok != "" && s.perToken[tok] >= s.cfg.MaxPerToken {
		return nil, &stream.LimitError{Setting: LimitSetting, Max: s.cfg.MaxPerToken, PerToken: true, Of: "watches", RetryAfter: 5 * time.Second}
	}
	sh, ok := s.shared[k]
	if !ok {
		sh = s.newShared(k)
		s.shared[k] = sh
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(sh, sb)
		}()
	}
	sh.refs++
	s.perToken[tok]++
	return sh, nil
}

// leave drops a hold; the last one stops the daemon's watch.
func (s *Service) leave(tok string, sh *shared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perToken[tok]--; s.perToken[tok] <= 0 {
		delete(s.perToken, tok)
	}
	if sh.refs--; sh.refs == 0 {
		if s.shared[sh.key] == sh {
			delete(s.shared, sh.key)
		}
		sh.cancel()
	}
}

// Held is how many watches tok holds, and how many daemon watches are open (for tests).
func (s *Service) Held(tok string) (token, daemon int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perToken[tok], len(s.shared)
}

// Close releases the hold. It is safe to call more than once.
func (w *Watch) Close() {
	w.once.Do(func() {
		w.s.leave(w.tok, w.sh)
		if w.shared {
			w.s.cfg.Shared.Give(sharedKey(w.tok))
		}
	})
}

// holderOf is what p's watches count under for MaxPerToken: its token's id, or for an access
// token of an OAuth grant the grant ("grant <id>"), whose refreshed tokens (a new one each
// time) hold watches together, as they hold streams (stream.Registry).
func holderOf(p auth.Principal) string {
	if p.Grant != "" && p.TokenID != "" {
		return "grant " + p.Grant
	}
	return p.TokenID
}

// sharedKey is what a token's watches are counted under in Config.Shared (beside its streams,
// counted under its id).
func sharedKey(tok string) string { return "watch " + tok }

// takeShared counts one more watch of tok across the replicas (Config.Shared), or refuses it
// past MaxPerToken. taken says whether it was counted there (Close gives it back). A count
// that cannot be read leaves this replica's own limit alone to hold.
func (s *Service) takeShared(ctx context.Context, tok string) (taken bool, err error) {
	if tok == "" || s.cfg.Shared == nil {
		return false, nil
	}
	ok, err := s.cfg.Shared.Take(ctx, sharedKey(tok), s.cfg.MaxPerToken)
	if err != nil {
		s.log.Warn("count the token's watches across replicas", "token", tok, "err", err)
		return false, nil
	}
	if !ok {
		return false, &stream.LimitError{Setting: LimitSetting, Max: s.cfg.MaxPerToken, PerToken: true, Of: "watches", RetryAfter: 5 * time.Second}
	}
	return true, nil
}

// Read returns the kept events after since, and next, the seq to pass as since next time.
// gap is set when events after since are no longer kept (more than Keep happened since).
func (w *Watch) Read(since int64) (evs []Event, next int64, gap *Gap) { return w.sh.read(since) }

// Changed returns a channel closed at the next event, or when the watch ends. Take it before
// Read: a change between the two still closes it.
func (w *Watch) Changed() <-chan struct{} { return w.sh.changedChan() }

// Last is the seq of the latest event (0: none yet).
func (w *Watch) Last() int64 {
	w.sh.mu.Lock()
	defer w.sh.mu.Unlock()
	return w.sh.last
}

// Err is why the daemon's watch ended (nil while it runs).
func (w *Watch) Err() error { return w.sh.endErr() }

// Gap says events From..To happened but are no longer kept. It goes out as a wire.Gap.
type Gap struct {
	From, To int64
}

// MarshalJSON writes g as the wire.Gap clients see.
func (g Gap) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.Gap{From: g.From, To: g.To})
}

// Peek reads the kept events after since of the watch of dir in the sandbox ref, if someone
// holds one, without holding it: watching is false when no one watches that directory now
// (then there is nothing to read). It checks that p may use the sandbox, as Open does.
func (s *Service) Peek(ctx context.Context, p auth.Principal, ref, dir string, recursive bool, since int64) (evs []Event, next int64, gap *Gap, watching bool, err error) {
	k, _, err := s.resolve(ctx, p, ref, dir, recursive)
	if err != nil {
		return nil, since, nil, false, err
	}
	s.mu.Lock()
	sh, ok := s.shared[k]
	s.mu.Unlock()
	if !ok {
		return nil, since, nil, false, nil
	}
	evs, next, gap = sh.read(since)
	return evs, next, gap, true, nil
}

// resolve checks that p may watch dir in the sandbox ref and returns the watch's key.
func (s *Service) resolve(ctx context.Context, p auth.Principal, ref, dir string, recursive bool) (key, store.Sandbox, error) {
	if dir == "" {
		return key{}, store.Sandbox{}, fmt.Errorf("%w: path must name a directory in the sandbox", ErrInvalid)
	}
	if err := limits.CheckPath(dir); err != nil {
		return key{}, store.Sandbox{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	sb, err := s.cfg.Sandboxes.Runnable(ctx, p, ref)
	if err != nil {
		return key{}, sb, err
	}
	if sb.DaemonURL == "" {
		return key{}, sb, fmt.Errorf("%w, which sandbox %s does not have", ErrNeedsDaemon, sb.Name)
	}
	if !path.IsAbs(dir) {
		dir = path.Join(sb.Workdir, dir)
	}
	return key{sandbox: sb.Name, created: sb.CreatedAt, dir: path.Clean(dir), recursive: recursive}, sb, nil
}

// startError is what a daemon's refusal to watch means to the client.
func startError(sb store.Sandbox, dir string, err error) error {
	var de *envd.Error
	switch {
	case errors.Is(err, envd.ErrNotFound):
		return fmt.Errorf("%w: %s does not exist in sandbox %s", ErrInvalid, dir, sb.Name)
	case errors.As(err, &de) && errors.Is(err, envd.ErrInvalidArgument):
		return fmt.Errorf("%w: %s: %s", ErrInvalid, dir, de.Message)
	case errors.Is(err, envd.ErrInvalidArgument):
		return fmt.Errorf("%w: %s: %v", ErrInvalid, dir, err)
	case errors.As(err, &de) && de.Code.String() == "resource_exhausted":
		return fmt.Errorf("%w: sandbox %s: %s", ErrDaemonLimit, sb.Name, de.Message)
	case errors.Is(err, envd.ErrUnavailable):
		return fmt.Errorf("%w: sandbox %s's daemon does not answer", sandbox.ErrUnavailable, sb.Name)
	default:
		return fmt.Errorf("watch %s in sandbox %s: %w", dir, sb.Name, err)
	}
}
