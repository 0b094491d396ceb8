package addrlimit

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAllowPerAddress(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	l := New(Config{PerMinute: 3, Now: c.now})
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
	v6 := New(Config{PerMinute: 1, Now: c.now})
	v6.Allow(netip.MustParseAddr("2001:db8::1"))
	if ok, _ := v6.Allow(netip.MustParseAddr("2001:db8::2")); ok {
		t.Error("a second address of the same /64 had its own allowance")
	}
}

// TestBoundedMemory: past MaxAddresses, refilled addresses are forgotten; while none is, new
// addresses share one allowance (they are not given fresh ones, nor tracked).
func TestBoundedMemory(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1000, 0)}
	l := New(Config{PerMinute: 2, MaxAddresses: 4, Now: c.now})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) }
	for i := range 4 {
		l.Allow(addr(i))
	}
	if l.Len() != 4 {
		t.Fatalf("tracked %d, want 4", l.Len())
	}
	okA, _ := l.Allow(addr(10))
	okB, _ := l.Allow(addr(11))
	okC, _ := l.Allow(addr(12))
	if !okA || !okB || okC || l.Len() != 4 {
		t.Errorf("new addresses while full: %v %v %v, tracked %d; want two allowed then refused (shared), 4 tracked", okA, okB, okC, l.Len())
	}
	c.t = c.t.Add(time.Minute) // everyone refilled
	if ok, _ := l.Allow(addr(20)); !ok || l.Len() != 1 {
		t.Errorf("after a minute: allowed %v, tracked %d; want allowed, the refilled forgotten (1 tracked)", ok, l.Len())
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
