package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// readyTimeout bounds a replica's start until /readyz answers 200; exitTimeout its exit after
// SIGTERM (serve's default shutdown grace is 30 s, plus its own cleanup).
const (
	readyTimeout = 60 * time.Second
	exitTimeout  = 45 * time.Second
)

// replica is one `hangar serve` process of the service, on a loopback port it keeps across
// restarts, in a process group of its own (so that stopping it reaches whatever it started
// there; the local provider's daemons run in sessions of their own and outlive it, as
// sandboxes must).
type replica struct {
	name string
	addr string // 127.0.0.1:port
	url  string // http://addr, its HANGAR_ADVERTISE_URL too
	bin  string
	env  []string
	log  *os.File // its stdout and stderr over all its starts

	mu     sync.Mutex // guards cmd, exited and id
	cmd    *exec.Cmd  // nil while it is not running
	exited chan struct{}
	id     string // its replica id in the database while it runs ("" when unknown)
}

// newReplica picks a free loopback port for a replica; it starts nothing.
func newReplica(name, bin, dir string, env []string) (*replica, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pick a port for replica %s: %w", name, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f, err := os.Create(filepath.Join(dir, "replica-"+name+".log"))
	if err != nil {
		return nil, err
	}
	r := &replica{name: name, addr: addr, url: "http://" + addr, bin: bin, log: f}
	r.env = append(append([]string{}, env...), "HANGAR_LISTEN="+addr, "HANGAR_ADVERTISE_URL="+r.url)
	return r, nil
}

// start runs the replica and waits until its /readyz answers 200.
func (r *replica) start(ctx context.Context) error {
	r.mu.Lock()
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	// Its own group, so that a signal reaches whatever it started there; and killed with this
	// program, should this program die without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(r.log, "=== chaos: start at %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		return fmt.Errorf("start replica %s: %w", r.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tk := time.NewTicker(50 * time.Millisecond) // polling readiness, until readyTimeout
	defer tk.Stop()
	for {
		if resp, err := http.Get(r.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("replica %s exited before it was ready (see %s)", r.name, r.log.Name())
		case <-ctx.Done():
			r.signal(syscall.SIGKILL)
			return fmt.Errorf("replica %s was not ready within %s (see %s)", r.name, readyTimeout, r.log.Name())
		case <-tk.C:
		}
	}
}

// signal sends sig to the replica's process group and waits (up to exitTimeout, then SIGKILL)
// for it to exit; it returns how long the exit took.
func (r *replica) signal(sig syscall.Signal) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	r.id = ""
	began := time.Now()
	fmt.Fprintf(r.log, "=== chaos: %s at %s\n", sig, began.UTC().Format(time.RFC3339Nano))
	syscall.Kill(-r.cmd.Process.Pid, sig)
	select {
	case <-r.exited:
	case <-time.After(exitTimeout):
		fmt.Fprintf(r.log, "=== chaos: no exit %s after %s: SIGKILL\n", exitTimeout, sig)
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	}
	r.cmd = nil
	return time.Since(began)
}

// proxy is a small load balancer on loopback: each request goes to a random backend in
// rotation; a backend taken out (as a Kubernetes endpoint is removed before a pod's preStop)
// gets no new request. A request is retried on another backend only when the connection was
// refused, before any byte was sent (a crashed replica); once a backend answered, its answer
// is passed on as it comes, flushed at each read, and a break in it breaks the client's
// connection as well (never a clean end the client would take for the whole answer).
type proxy struct {
	backends []*replica
	tr       *http.Transport
	srv      *http.Server
	url      string

	mu      sync.Mutex // guards out and pending
	out     map[*replica]bool
	pending map[*replica]int // requests sent to a backend that have no answer's headers yet
}

// newProxy listens on a loopback port and serves until close.
func newProxy(backends []*replica) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the proxy: %w", err)
	}
	p := &proxy{
		backends: backends,
		// One connection per request: a pooled connection to a replica that has since been
		// restarted would fail after the request was written, which is not a refusal.
		tr:      &http.Transport{DisableKeepAlives: true, DisableCompression: true},
		url:     "http://" + ln.Addr().String(),
		out:     map[*replica]bool{},
		pending: map[*replica]int{},
	}
	p.srv = &http.Server{Handler: p}
	go p.srv.Serve(ln)
	return p, nil
}

// close stops the proxy and ends the connections it holds.
func (p *proxy) close() { p.srv.Close() }

// take takes a backend out of rotation (in: false) or puts it back.
func (p *proxy) take(r *replica, in bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out[r] = !in
}

// settle waits (up to d) until every request already sent to r has its answer's headers: what
// a preStop hook's pause gives the requests a balancer routed to a pod before it removed it.
func (p *proxy) settle(r *replica, d time.Duration) bool {
	return pollUntil(context.Background(), d, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.pending[r] == 0
	})
}

// pick returns a random backend in rotation that was not tried yet, or nil.
func (p *proxy) pick(tried map[*replica]bool) *replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	var in []*replica
	for _, b := range p.backends {
		if !p.out[b] && !tried[b] {
			in = append(in, b)
		}
	}
	if len(in) == 0 {
		return nil
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(in))))
	return in[n.Int64()]
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	tried := map[*replica]bool{}
	for {
		b := p.pick(tried)
		if b == nil {
			http.Error(w, "no backend accepted the connection", http.StatusBadGateway)
			return
		}
		tried[b] = true
		out, err := http.NewRequestWithContext(r.Context(), r.Method, b.url+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out.Header = r.Header.Clone()
		p.mu.Lock()
		p.pending[b]++
		p.mu.Unlock()
		resp, err := p.tr.RoundTrip(out)
		p.mu.Lock()
		p.pending[b]--
		p.mu.Unlock()
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue
		}
		if err != nil {
			if r.Context().Err() == nil {
				http.Error(w, "backend "+b.name+" broke the connection: "+err.Error(), http.StatusBadGateway)
			}
			return
		}
		p.relay(w, resp)
		return
	}
}

// relay passes resp on to w as it comes.
func (p *proxy) relay(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			panic(http.ErrAbortHandler) // the backend broke: so does the client's connection
		}
	}
}

// database is the run's own schema on the test PostgreSQL.
type database struct {
	db     *sql.DB
	schema string
	url    string // the base URL with search_path set to the schema
}

// newDatabase creates a fresh schema on base's server.
func newDatabase(base string) (*database, error) {
	db, err := sql.Open("pgx", base)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", base, err)
	}
	schema := "chaos_" + strings.ToLower(rand.Text()[:10])
	if _, err := db.Exec(`CREATE SCHEMA "` + schema + `"`); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		db.Close()
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return &database{db: db, schema: schema, url: u.String()}, nil
}

// drop drops the schema and closes the connection.
func (d *database) drop() {
	d.db.Exec(`DROP SCHEMA "` + d.schema + `" CASCADE`)
	d.db.Close()
}

// owners maps each sandbox (by name) to the advertised URL and id of the replica whose lease
// on it has not expired, by the database's clock.
func (d *database) owners(ctx context.Context) (map[string]owner, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT l.sandbox, r.url, r.id
		FROM "`+d.schema+`".leases l JOIN "`+d.schema+`".replicas r ON r.id = l.replica
		WHERE l.expires_at > now()`)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	out := map[string]owner{}
	for rows.Next() {
		var name string
		var o owner
		if err := rows.Scan(&name, &o.url, &o.id); err != nil {
			return nil, err
		}
		out[name] = o
	}
	return out, rows.Err()
}

// owner is a lease's holder.
type owner struct{ url, id string }

// learnID reads the replica's id (the newest row of its URL) once it runs.
func (r *replica) learnID(ctx context.Context, d *database) {
	var id string
	if err := d.db.QueryRowContext(ctx, `SELECT id FROM "`+d.schema+`".replicas WHERE url = $1 ORDER BY started_at DESC LIMIT 1`, r.url).Scan(&id); err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.id = id
	}
}

// liveIDs is the ids of the replicas running now.
func liveIDs(reps []*replica) map[string]bool {
	out := map[string]bool{}
	for _, r := range reps {
		r.mu.Lock()
		if r.id != "" {
			out[r.id] = true
		}
		r.mu.Unlock()
	}
	return out
}
