package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/mcp"
	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/replicas"
	"github.com/hangar-dev/hangar/internal/replicas/forward"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/turns"
)

// The topics replicas tell each other of (docs/replicas.md). Each carries ids, never data.
const (
	topicEvents = "events" // <session id> [<job id>]: events were appended
	topicTurn   = "turn"   // <turn id>: a turn is queued for its sandbox's owner
	topicEnded  = "ended"  // sandbox <reason> <name> | token <id>: streams ended
)

// membership is this serve's part of several replicas on one PostgreSQL: the replicas package's
// Cluster, wired to the domain's hooks; nil with SQLite, where nothing of it runs. Its processes and turns are set by startDomain as soon as they exist,
// before Run starts the listener: the handlers read them from its goroutine.
type membership struct {
	cl    *replicas.Cluster
	log   *slog.Logger
	clock quartz.Clock

	processes *process.Manager

	mu    sync.Mutex
	turns *turns.Service // set once the turns service exists (setTurns); its Resume then takes the sandboxes gained before

	cancel context.CancelFunc
	wg     sync.WaitGroup // Run, and the handlers' own goroutines
}

// joinReplicas joins the replicas of cfg's PostgreSQL; nil without one.
func joinReplicas(ctx context.Context, cfg config.Config, addr net.Addr, reg prometheus.Registerer, clock quartz.Clock, log *slog.Logger) (*membership, error) {
	if cfg.DatabaseURL == "" {
		return nil, nil
	}
	url := cfg.Replicas.AdvertiseURL
	if url == "" {
		url = advertised(addr)
	}
	cl, err := replicas.New(ctx, replicas.Config{DatabaseURL: cfg.DatabaseURL, AdvertiseURL: url,
		LeaseTTL: time.Duration(cfg.Replicas.LeaseSeconds) * time.Second, Registerer: reg, Logger: log, Clock: clock})
	if err != nil {
		return nil, err
	}
	log.Info("one of several replicas on this database", "replica", cl.ID(), "advertise_url", url, "lease", time.Duration(cfg.Replicas.LeaseSeconds)*time.Second)
	if cfg.Secret == "" {
		log.Warn("HANGAR_SECRET is not set: this replica keys process tags with <data dir>/secret, so another replica taking over its sandboxes cannot adopt their processes unless every replica shares that file; set the same HANGAR_SECRET on every replica")
	}
	return &membership{cl: cl, log: log, clock: clock}, nil
}

// advertised is http://<addr>, with the hostname in place of an address of every interface.
func advertised(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// owners is what the process manager asks who follows a sandbox: nil alone.
func (r *membership) owners() process.Owners {
	if r == nil {
		return nil
	}
	return leavingOwners{r.cl}
}

// leavingOwners is the Cluster's Owner, saying a shutdown as the stream registry does (a 503
// "shutting down" to a request that arrives meanwhile).
type leavingOwners struct{ cl *replicas.Cluster }

func (o leavingOwners) Owner(ctx context.Context, sandbox string) (string, bool, error) {
	url, mine, err := o.cl.Owner(ctx, sandbox)
	if errors.Is(err, replicas.ErrLeaving) {
		err = fmt.Errorf("%w: %w", stream.ErrShuttingDown, err)
	}
	return url, mine, err
}

// forTurns is what the turns service asks and tells: nil alone.
func (r *membership) forTurns() turns.Replicas {
	if r == nil {
		return nil
	}
	return r
}

// shared counts tokens' streams across the replicas: nil alone.
func (r *membership) shared() stream.SharedCounts {
	if r == nil {
		return nil
	}
	return r.cl
}

// announce is the stream registry's Announce: nil alone.
func (r *membership) announce() func(stream.Ending) {
	if r == nil {
		return nil
	}
	return func(e stream.Ending) {
		arg := "token " + e.Token
		if e.Token == "" {
			arg = "sandbox " + string(e.Reason) + " " + e.Sandbox
		}
		r.cl.Publish(context.Background(), topicEnded, arg)
	}
}

// forwarder passes requests on to the replica that owns their sandbox: nil alone.
func (r *membership) forwarder(streams *stream.Registry) *forward.Forwarder {
	if r == nil {
		return nil
	}
	return &forward.Forwarder{Self: r.cl.AdvertiseURL(), Streams: streams, Unreachable: r.cl.Unreachable, Clock: r.clock}
}

// sessions names this replica in the ids of the MCP sessions it opens and finds the replica
// that holds another's: nil alone.
func (r *membership) sessions() mcp.Replicas {
	if r == nil {
		return nil
	}
	return r.cl
}

// Owns is turns.Replicas'. A database that does not answer owns nothing: the turn waits, as
// one queued for another replica, rather than risk two watchers.
func (r *membership) Owns(ctx context.Context, sandbox string) bool {
	_, mine, err := r.cl.Owner(ctx, sandbox)
	if err != nil {
		r.log.Warn("ask who owns a sandbox", "sandbox", sandbox, "err", err)
	}
	return mine
}

// Appended is turns.Replicas'.
func (r *membership) Appended(ctx context.Context, sessionID, jobID string) {
	r.cl.Publish(ctx, topicEvents, turns.EventsArg(sessionID, jobID))
}

// Queued is turns.Replicas'.
func (r *membership) Queued(ctx context.Context, turnID string) {
	r.cl.Publish(ctx, topicTurn, turnID)
}

// gained follows the processes and watches the turns of a sandbox whose lease this replica
// gained, however it came (turns.Service.ResumeSandbox: its queued turns run here unless a
// launch of theirs began). A lease gained before the turns service exists is the service's
// Resume's.
func (r *membership) gained(ctx context.Context, sandbox string, _ replicas.Gain) {
	if r.processes != nil {
		r.processes.AdoptSandbox(ctx, sandbox)
	}
	r.mu.Lock()
	ts := r.turns
	r.mu.Unlock()
	if ts != nil {
		if err := ts.ResumeSandbox(ctx, sandbox); err != nil {
			r.log.Warn("watch the turns of a sandbox", "sandbox", sandbox, "err", err)
		}
	}
}

// lost stops following what another replica follows now.
func (r *membership) lost(sandbox string) {
	if r.processes != nil {
		r.processes.Release(sandbox)
	}
	r.mu.Lock()
	ts := r.turns
	r.mu.Unlock()
	if ts != nil {
		ts.Release(sandbox)
	}
}

// setLeases is called once the process manager exists, before anything can take a lease.
func (r *membership) setLeases(processes *process.Manager) {
	if r == nil {
		return
	}
	r.processes = processes
	r.cl.OnLeases(r.gained, r.lost)
}

// setTurns is called once the turns service exists, before its Resume.
func (r *membership) setTurns(ts *turns.Service) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns = ts
}

// start hears the other replicas and keeps the leases until stop.
func (r *membership) start(streams *stream.Registry) {
	if r == nil {
		return
	}
	r.cl.Handle(topicEvents, func(ctx context.Context, arg string) {
		if r.turns != nil {
			r.turns.Wake(turns.ParseEventsArg(arg))
		}
	})
	r.cl.Handle(topicEnded, func(ctx context.Context, arg string) {
		kind, rest, _ := strings.Cut(arg, " ")
		switch kind {
		case "token":
			streams.EndedElsewhere(stream.Ending{Token: rest})
		case "sandbox":
			reason, name, _ := strings.Cut(rest, " ")
			streams.EndedElsewhere(stream.Ending{Sandbox: name, Reason: stream.Reason(reason)})
		}
	})
	r.cl.Handle(topicTurn, func(ctx context.Context, arg string) {
		r.goAsync(ctx, func(ctx context.Context) {
			if r.turns != nil {
				r.turns.TakeTurn(ctx, arg)
			}
		})
	})
	r.cl.OnResync(func(ctx context.Context) {
		if r.turns != nil {
			r.turns.WakeAll()
		}
		r.goAsync(ctx, func(ctx context.Context) {
			if r.turns != nil {
				r.turns.TakeQueued(ctx)
			}
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.cl.Run(ctx) }()
}

// goAsync runs fn off the listener's goroutine (it reads the store, may reach daemons); stop
// waits for it.
func (r *membership) goAsync(ctx context.Context, fn func(ctx context.Context)) {
	r.wg.Add(1)
	go func() { defer r.wg.Done(); fn(ctx) }()
}

// handOver is the start of a shutdown, once the streams ended: this replica stops following its
// sandboxes' processes and watching their turns, and hands their leases to the live replicas,
// so they follow them at once — not after the requests in flight here finished (up to
// HANGAR_SHUTDOWN_GRACE). Requests that reach it afterwards get 503 "shutting down".
func (r *membership) handOver() {
	if r == nil || r.cancel == nil {
		return
	}
	for _, sb := range r.cl.Leave() {
		r.lost(sb)
	}
	r.cancel()
	r.wg.Wait()
}

// stop hands the leases back (after the domain stopped following) and leaves.
func (r *membership) stop() {
	if r == nil {
		return
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	r.cl.Close()
}
