package addrlimit

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct {
	quartz.Clock // nil: only Now is asked of it
	t            time.Time
}

func (c *clock) Now(...string) time.Time { return c.t }

func TestAllowPerAddress(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	l := New(Config{PerMinute: 3, Clock: c})
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for i := range 3 {
		if ok, _ := l.Allow(a); !ok {
			t.Fatalf("request %d of a refused", i+1)
		}
	}
	ok, after := l.Allow(a)
	if ok || after != 20*time.Second {
		t.Errorf("4th request of a = %v, retry after %v; want refused, 20s (a minute / 3)", ok, after)
	}
	if ok, _ := l.Allow(b); !ok {
		t.Error("b was refused for a's requests")
	}
	c.t = c.t.Add(20 * time.Second)
	if ok, _ := l.Allow(a); !ok {
		t.Error("a refused after its retry-after")
	}
	// One IPv6 host picks addresses from its /64: one count.
	v6 := New(Config{PerMinute: 1, Clock: c})
	v6.Allow(netip.MustParseAddr("2001:db8::1"))
	if ok, _ := v6.Allow(netip.MustParseAddr("2001:db8::2")); ok {
		t.Error("a second address of the same /64 had its own allowance")
	}
}

// TestBoundedMemory: past MaxAddresses, the count used least recently is forgotten, whether or
// not it has refilled; a new address gets its own allowance, never a share of a common one.
func TestBoundedMemory(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	l := New(Config{PerMinute: 2, MaxAddresses: 4, Clock: c})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := range 4 {
		l.Allow(addr(i))
		l.Allow(addr(i)) // each used up
	}
	l.Allow(addr(0)) // 0 used again: 1 is now the least recently used
	for i := 10; i < 13; i++ {
		if ok, _ := l.Allow(addr(i)); !ok {
			t.Errorf("new address %d refused while the table was full; want its own allowance", i)
		}
	}
	if l.Len() != 4 {
		t.Errorf("tracked %d, want 4", l.Len())
	}
	if ok, _ := l.Allow(addr(12)); !ok {
		t.Error("the newest address lost its count")
	}
	// 0, 10, 11, 12 were kept (1, 2, 3 were forgotten): 12 is at its second request, and 0,
	// used most recently of the first four, is still used up.
	if ok, _ := l.Allow(addr(12)); ok {
		t.Error("address 12 got a third request in a minute")
	}
	if ok, _ := l.Allow(addr(0)); ok {
		t.Error("address 0 was forgotten before the older ones")
	}
}

// TestIPv6Sites: a /48 is one site: its /64s share SiteShare allowances, a site refused does
// not fill the table, and one flooding site starves no one else.
func TestIPv6Sites(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	l := New(Config{PerMinute: 1, MaxAddresses: 100, Clock: c})
	host := func(site, net int) netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(site), 0, byte(net >> 8), byte(net), 15: 1})
	}
	for n := range SiteShare {
		if ok, _ := l.Allow(host(1, n)); !ok {
			t.Fatalf("/64 number %d of a /48 refused; want %d allowed", n+1, SiteShare)
		}
	}
	for n := SiteShare; n < 1000; n++ {
		if ok, after := l.Allow(host(1, n)); ok || after <= 0 {
			t.Fatalf("/64 number %d of a /48: allowed %v, retry after %v; want refused past the site's %d", n+1, ok, after, SiteShare)
		}
	}
	if l.Len() != SiteShare+1 {
		t.Errorf("tracked %d after a site's flood, want %d (its /48 and the /64s it was allowed)", l.Len(), SiteShare+1)
	}
	if ok, _ := l.Allow(host(2, 0)); !ok {
		t.Error("another /48 was refused for the first one's flood")
	}
	if ok, _ := l.Allow(netip.MustParseAddr("192.0.2.1")); !ok {
		t.Error("an IPv4 address was refused for a /48's flood")
	}
	// A refused /64 gives back nothing it did not take: the site's allowance returns on time.
	c.t = c.t.Add(time.Minute / SiteShare)
	if ok, _ := l.Allow(host(1, 500)); !ok {
		t.Error("the site was still refused after its retry-after")
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies, err := ParsePrefixes("10.0.0.0/8, 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, remote, xff string
		trusted           []netip.Prefix
		want              string
	}{
		{"no proxies: the header is ignored", "203.0.113.5:4000", "1.2.3.4", nil, "203.0.113.5"},
		{"an untrusted peer's header is ignored", "203.0.113.5:4000", "1.2.3.4", proxies, "203.0.113.5"},
		{"a trusted proxy's header", "10.1.2.3:4000", "198.51.100.9", proxies, "198.51.100.9"},
		{"the client's own hops are not taken", "10.1.2.3:4000", "6.6.6.6, 198.51.100.9", proxies, "198.51.100.9"},
		{"through two proxies", "10.1.2.3:4000", "198.51.100.9, 192.0.2.7", proxies, "198.51.100.9"},
		{"a garbled hop", "10.1.2.3:4000", "198.51.100.9, junk", proxies, "10.1.2.3"},
		{"IPv6 peer", "[2001:db8::5]:4000", "", nil, "2001:db8::5"},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := ClientAddr(r, c.trusted); got != netip.MustParseAddr(c.want) {
			t.Errorf("%s: ClientAddr = %v, want %s", c.name, got, c.want)
		}
	}
	if _, err := ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Error("ParsePrefixes took 10.0.0.0/33")
	}
}
