package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// handoverWait is how long after a replica's exit the roll looks for its sandboxes' new
// owners before it starts the replica anew (the issue saw leases unowned 10 s later).
const handoverWait = 10 * time.Second

// takeoverWait bounds the probes after a SIGKILL: past the default lease (15 s) and a renewal
// round, so that today's takeover is measured, not cut off.
const takeoverWait = 45 * time.Second

// handover is one replica's roll: how long its exit took, and for each sandbox whose lease it
// held, the seconds from the SIGTERM until a live peer held it (-1: not within handoverWait
// of the exit).
type handover struct {
	Replica        string             `json:"replica"`
	ExitSeconds    float64            `json:"exit_seconds"`
	Sandboxes      []string           `json:"sandboxes"`
	Seconds        map[string]float64 `json:"handover_seconds"`
	RestartSeconds float64            `json:"ready_again_seconds"`
}

// takeover is the crash: for each sandbox the killed replica held, the seconds from the SIGKILL
// until a surviving replica answered a request about its processes with 200 (-1: not within
// takeoverWait), and the answers the probes got meanwhile.
type takeover struct {
	Replica        string             `json:"replica"`
	Sandboxes      []string           `json:"sandboxes"`
	Seconds        map[string]float64 `json:"takeover_seconds"`
	ProbeAnswers   map[string]int     `json:"probe_answers"`
	RestartSeconds float64            `json:"ready_again_seconds"`
}

func (h handover) summary() string { return secondsSummary(h.Sandboxes, h.Seconds) }
func (k takeover) summary() string { return secondsSummary(k.Sandboxes, k.Seconds) }

func secondsSummary(sbs []string, secs map[string]float64) string {
	if len(sbs) == 0 {
		return "no sandboxes"
	}
	var parts []string
	for _, sb := range sbs {
		if s := secs[sb]; s < 0 {
			parts = append(parts, sb+" never")
		} else {
			parts = append(parts, fmt.Sprintf("%s %.2f s", sb, s))
		}
	}
	return strings.Join(parts, ", ")
}

// held is the sandboxes whose lease r holds now.
func held(ctx context.Context, db *database, r *replica) []string {
	owners, err := db.owners(ctx)
	if err != nil {
		return nil
	}
	out := []string{}
	for sb, o := range owners {
		if o.url == r.url {
			out = append(out, sb)
		}
	}
	sort.Strings(out)
	return out
}

// roll is one step of a rolling update: r out of the proxy, SIGTERM, its exit, its sandboxes
// watched for a peer to own them, r started anew on the same address, back in the proxy.
func roll(ctx context.Context, db *database, px *proxy, r *replica, reps []*replica) handover {
	h := handover{Replica: r.name, Sandboxes: held(ctx, db, r), Seconds: map[string]float64{}}
	px.take(r, false)
	if !px.settle(r, 10*time.Second) {
		fmt.Printf("requests sent to %s before it left the proxy had no answer 10 s later\n", r.name)
	}
	term := time.Now()
	var wg sync.WaitGroup
	exited := make(chan struct{})
	wg.Go(func() { watchOwners(ctx, db, r, h.Sandboxes, term, exited, h.Seconds) })
	h.ExitSeconds = r.signal(syscall.SIGTERM).Seconds()
	close(exited)
	wg.Wait()
	began := time.Now()
	if err := r.start(ctx); err != nil {
		fmt.Println("!!", err)
	}
	r.learnID(ctx, db)
	h.RestartSeconds = time.Since(began).Seconds()
	px.take(r, true)
	return h
}

// watchOwners records, for each of sbs, the seconds from since until a replica other than r
// holds its lease; it gives up handoverWait after exited closes.
func watchOwners(ctx context.Context, db *database, r *replica, sbs []string, since time.Time, exited <-chan struct{}, out map[string]float64) {
	for _, sb := range sbs {
		out[sb] = -1
	}
	var deadline <-chan time.Time
	tk := time.NewTicker(20 * time.Millisecond) // the database's leases, read until all moved
	defer tk.Stop()
	for {
		if owners, err := db.owners(ctx); err == nil {
			left := 0
			for _, sb := range sbs {
				if out[sb] >= 0 {
					continue
				}
				if o, ok := owners[sb]; ok && o.url != r.url {
					out[sb] = math.Round(time.Since(since).Seconds()*1000) / 1000
				} else {
					left++
				}
			}
			if left == 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
			exited, deadline = nil, time.After(handoverWait)
		case <-deadline:
			return
		case <-tk.C:
		}
	}
}

// crash kills the replica holding the most leases with SIGKILL, probes each of its sandboxes
// on the surviving replicas until one answers for it, and starts it anew.
func crash(ctx context.Context, db *database, reps []*replica, lc *client) takeover {
	victim := reps[0]
	var sbs []string
	for _, r := range reps {
		if h := held(ctx, db, r); len(h) > len(sbs) {
			victim, sbs = r, h
		}
	}
	k := takeover{Replica: victim.name, Sandboxes: sbs, Seconds: map[string]float64{}, ProbeAnswers: map[string]int{}}
	var peers []*replica
	for _, r := range reps {
		if r != victim {
			peers = append(peers, r)
		}
	}
	var mu sync.Mutex // guards k's maps
	killed := time.Now()
	victim.signal(syscall.SIGKILL)
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Go(func() {
			took := probe(ctx, lc, peers[i%len(peers)], sb, killed, func(answer string) {
				mu.Lock()
				k.ProbeAnswers[answer]++
				mu.Unlock()
			})
			mu.Lock()
			k.Seconds[sb] = took
			mu.Unlock()
		})
	}
	wg.Wait()
	began := time.Now()
	if err := victim.start(ctx); err != nil {
		fmt.Println("!!", err)
	}
	victim.learnID(ctx, db)
	k.RestartSeconds = time.Since(began).Seconds()
	return k
}

// probe asks peer for sb's processes every 50 ms until it answers 200, and returns the seconds
// from since (-1 when none came within takeoverWait). Each answer is passed to seen.
func probe(ctx context.Context, lc *client, peer *replica, sb string, since time.Time, seen func(string)) float64 {
	c := &client{base: peer.url, token: lc.token, hc: lc.hc, ph: &phases{cur: "probe"}, tl: newTally()}
	ctx, cancel := context.WithTimeout(ctx, takeoverWait)
	defer cancel()
	tk := time.NewTicker(50 * time.Millisecond) // a client asking again
	defer tk.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.json(rctx, "probe", "GET", "/api/sandboxes/"+sb+"/processes", "", nil)
		rcancel()
		switch se := err.(type) {
		case nil:
			seen("200")
			return math.Round(time.Since(since).Seconds()*1000) / 1000
		case *statusError:
			seen(fmt.Sprint(se.code))
		default:
			seen("error")
		}
		select {
		case <-ctx.Done():
			return -1
		case <-tk.C:
		}
	}
}

// percentiles is p50 and max of xs in seconds, -1 for max when any is -1 (never).
func percentiles(xs []float64) (p50, maxv float64) {
	var ok []float64
	never := false
	for _, x := range xs {
		if x < 0 {
			never = true
		} else {
			ok = append(ok, x*1000)
		}
	}
	p50 = benchkit.Percentile(ok, 50) / 1000
	maxv = benchkit.Percentile(ok, 100) / 1000
	if never {
		maxv = -1
	}
	return p50, maxv
}
