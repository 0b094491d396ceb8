// Package addrlimit rate-limits requests per client address (golang.org/x/time/rate), for the
// endpoints anyone may call without a token: OAuth's open client registration and the consent
// form. It also finds a request's client address, honouring X-Forwarded-For only from proxies it
// is told to trust.
package addrlimit

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/time/rate"
)

// Config configures a Limiter.
type Config struct {
	// PerMinute is how many requests one address may make in a minute, at a steady rate; as
	// many may come at once after a quiet minute (the burst). An IPv6 address is counted by
	// its /64, and each request is also counted against its /48, which may make
	// SiteShare × PerMinute (see key). Required (> 0).
	PerMinute int
	// MaxAddresses bounds the counts (addresses, /64s and /48s) kept at once. Past it, the
	// count used least recently is forgotten, in constant time: that address starts again
	// with a full allowance, which only a client that cycles through more than MaxAddresses
	// addresses gains from, and such a client has that many allowances anyway. Default 10,000
	// (about a megabyte).
	MaxAddresses int
	// Clock refills the allowances. Default the real clock.
	Clock quartz.Clock
}

// SiteShare is how many times one address's allowance an IPv6 /48 has in all. A /48 is what
// one site (one customer of a provider) is given, and it holds 65,536 /64s: counted by /64
// alone, one site could make 65,536 allowances' worth of requests and push everyone else's
// counts out of the table. Four, because a site usually has a few hosts (on their own /64s)
// behind it, as an IPv4 office has behind its one address.
const SiteShare = 4

// Limiter counts requests per address. It is safe for concurrent use.
type Limiter struct {
	cfg   Config
	every rate.Limit

	mu    sync.Mutex
	keys  map[netip.Prefix]*list.Element // the counts by key; each element's Value is a *count
	order *list.List                     // the counts, used most recently first
}

// count is one key's limiter, kept in Limiter.order.
type count struct {
	key netip.Prefix
	lim *rate.Limiter
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.MaxAddresses <= 0 {
		cfg.MaxAddresses = 10_000
	}
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	cfg.PerMinute = max(cfg.PerMinute, 1)
	every := rate.Every(time.Minute / time.Duration(cfg.PerMinute))
	return &Limiter{cfg: cfg, every: every, keys: map[netip.Prefix]*list.Element{}, order: list.New()}
}

// Allow takes one request of addr's allowance: ok, or how long until the next one is allowed.
// An IPv6 address's /48 is asked first, and a request it refuses does not touch (or start a
// count for) the /64: a site refused does not fill the table with its /64s.
func (l *Limiter) Allow(addr netip.Addr) (ok bool, retryAfter time.Duration) {
	now := l.cfg.Clock.Now()
	addr = addr.Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	var site *rate.Reservation
	if addr.Is6() {
		p, _ := addr.Prefix(48)
		site = l.limiter(p, SiteShare, now).ReserveN(now, 1)
		if d := site.DelayFrom(now); d > 0 {
			site.CancelAt(now)
			return false, d
		}
	}
	r := l.limiter(key(addr), 1, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		if site != nil {
			site.CancelAt(now)
		}
		return false, d
	}
	return true, 0
}

// limiter returns k's limiter (with share times the allowance), marking it used, making one
// and forgetting the least recently used when full. l.mu is held.
func (l *Limiter) limiter(k netip.Prefix, share int, now time.Time) *rate.Limiter {
	if e, ok := l.keys[k]; ok {
		l.order.MoveToFront(e)
		return e.Value.(*count).lim
	}
	if l.order.Len() >= l.cfg.MaxAddresses {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.keys, oldest.Value.(*count).key)
	}
	lim := rate.NewLimiter(l.every*rate.Limit(share), l.cfg.PerMinute*share)
	l.keys[k] = l.order.PushFront(&count{key: k, lim: lim})
	return lim
}

// Len says how many counts (addresses, /64s and /48s) are kept.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// key is what addr is counted under: an IPv4 address itself, an IPv6 one by its /64 (one
// host usually has a whole /64 to pick addresses from).
func key(addr netip.Addr) netip.Prefix {
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p
	}
	return netip.PrefixFrom(addr, addr.BitLen())
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
