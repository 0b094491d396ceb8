package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// How long a fetched Client ID Metadata Document is kept (so that opening the consent page
// again, or many times, does not fetch it again), how long a failure is, and how many are
// kept at most.
const (
	docTTL      = 5 * time.Minute
	docFailTTL  = 30 * time.Second
	maxDocCache = 1000
)

// nonPublic are the prefixes that IsGlobalUnicast and IsPrivate leave out but that are not
// on the public internet (RFC 6890 and the IANA special-purpose registries), or that embed an
// IPv4 address that could be internal (NAT64, 6to4).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// PublicAddr is the default Config.ClientIDAddrAllowed: a global unicast address, not
// loopback, private, link-local, unspecified, multicast or another special-purpose range.
func PublicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// fetchHTTPClient makes the client that fetches Client ID Metadata Documents from base (nil: a
// 10s timeout): its transport connects only to addresses allowed says yes to, checked on the
// address actually dialled (so a host name that resolves, or is rebound, to an internal
// address is refused too), through no proxy, and it follows no redirect.
func fetchHTTPClient(base *http.Client, allowed func(netip.Addr) bool) (*http.Client, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	if base != nil {
		hc = new(http.Client)
		*hc = *base
	}
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("oauth HTTPClient: its Transport must be an *http.Transport (hangar guards its dialer), not %T", t)
	}
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("refuse to connect to %s: %w", address, err)
		}
		if !allowed(ap.Addr()) {
			return fmt.Errorf("refuse to connect to %s: not a public address", address)
		}
		return nil
	}}
	tr.Proxy = nil
	tr.DialContext = d.DialContext
	tr.DialTLSContext = nil
	hc.Transport = tr
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return hc, nil
}

// docCache keeps fetched Client ID Metadata Documents, and failures, for a while.
type docCache struct {
	mu sync.Mutex
	m  map[string]cachedDoc
}

type cachedDoc struct {
	c     Client
	err   error
	until time.Time
}

func (dc *docCache) get(id string, now time.Time) (cachedDoc, bool) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	d, ok := dc.m[id]
	if !ok || !now.Before(d.until) {
		return cachedDoc{}, false
	}
	return d, true
}

// put keeps d; when the cache is full it drops what has expired, and then, if it is still
// full, any one entry.
func (dc *docCache) put(id string, d cachedDoc, now time.Time) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if dc.m == nil {
		dc.m = map[string]cachedDoc{}
	}
	if _, ok := dc.m[id]; !ok && len(dc.m) >= maxDocCache {
		for k, v := range dc.m {
			if !now.Before(v.until) {
				delete(dc.m, k)
			}
		}
		for k := range dc.m {
			if len(dc.m) < maxDocCache {
				break
			}
			delete(dc.m, k)
		}
	}
	dc.m[id] = d
}

// cachedClient is fetchClient through the cache. A fetch cut short by the request's own end
// is not kept.
func (s *Server) cachedClient(ctx context.Context, id string) (Client, error) {
	now := s.cfg.Clock.Now()
	if d, ok := s.docs.get(id, now); ok {
		return d.c, d.err
	}
	c, err := s.fetchClient(ctx, id)
	var oe *Error
	switch {
	case err == nil:
		s.docs.put(id, cachedDoc{c: c, until: now.Add(docTTL)}, now)
	case errors.As(err, &oe) && ctx.Err() == nil:
		s.docs.put(id, cachedDoc{err: err, until: now.Add(docFailTTL)}, now)
	}
	return c, err
}
