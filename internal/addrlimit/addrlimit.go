// Package addrlimit rate-limits requests per client address (golang.org/x/time/rate), for the
// endpoints anyone may call without a token: OAuth's open client registration and the consent
// form. It also finds a request's client address, honouring X-Forwarded-For only from proxies it
// is told to trust.
package addrlimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Config configures a Limiter.
type Config struct {
	// PerMinute is how many requests one address may make in a minute, at a steady rate; as
	// many may come at once after a quiet minute (the burst). Required (> 0).
	PerMinute int
	// MaxAddresses bounds the addresses tracked at once. Past it, the addresses whose limiter
	// has refilled are forgotten (forgetting one changes nothing: a new limiter starts full);
	// if none has, new addresses share one limiter until some refill. Default 10,000 (about a
	// megabyte).
	MaxAddresses int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Limiter counts requests per address. It is safe for concurrent use.
type Limiter struct {
	cfg   Config
	every rate.Limit

	mu       sync.Mutex
	addrs    map[netip.Addr]*rate.Limiter // by address (an IPv6 one by its /64)
	overflow *rate.Limiter                // shared by new addresses while addrs is full
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.MaxAddresses <= 0 {
		cfg.MaxAddresses = 10_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	every := rate.Every(time.Minute / time.Duration(max(cfg.PerMinute, 1)))
	return &Limiter{cfg: cfg, every: every, addrs: map[netip.Addr]*rate.Limiter{},
		overflow: rate.NewLimiter(every, max(cfg.PerMinute, 1))}
}

// Allow takes one request of addr's allowance: ok, or how long until the next one is allowed.
func (l *Limiter) Allow(addr netip.Addr) (ok bool, retryAfter time.Duration) {
	now := l.cfg.Now()
	lim := l.limiter(key(addr), now)
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limiter returns k's limiter, making one (and forgetting refilled ones when full).
func (l *Limiter) limiter(k netip.Addr, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim, ok := l.addrs[k]; ok {
		return lim
	}
	if len(l.addrs) >= l.cfg.MaxAddresses {
		burst := float64(l.overflow.Burst())
		for a, lim := range l.addrs {
			if lim.TokensAt(now) >= burst {
				delete(l.addrs, a)
			}
		}
		if len(l.addrs) >= l.cfg.MaxAddresses {
			return l.overflow
		}
	}
	lim := rate.NewLimiter(l.every, l.overflow.Burst())
	l.addrs[k] = lim
	return lim
}

// Len says how many addresses are tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

// key is what addr is counted under: an IPv4 address itself, an IPv6 one by its /64 (one
// host usually has a whole /64 to pick addresses from).
func key(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}

// ParsePrefixes parses a comma-separated list of addresses and CIDR prefixes (10.0.0.0/8,
// 192.168.1.7, fd00::/8).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// ClientAddr is the address a request came from: its connection's peer, or, when that peer is
// one of the trusted proxies, the rightmost X-Forwarded-For address that is not a trusted
// proxy (what the first proxy saw; the addresses left of it are the client's to write). With no
// trusted proxies, X-Forwarded-For is never read: anyone could write it.
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := peerAddr(r.RemoteAddr)
	if !isTrusted(peer, trusted) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a hop that is no address: the chain cannot be read past it
		}
		if a = a.Unmap(); !isTrusted(a, trusted) {
			return a
		}
		peer = a
	}
	return peer
}

func peerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
