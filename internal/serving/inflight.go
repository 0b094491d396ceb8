// Package serving holds the mechanics hangar's HTTP transports (rest, mcp) share about serving
// requests: counting the requests in flight, for a drain, the write deadline of a long
// response, and h2c beside HTTP/1.1 (which hangar-envd serves as well). It imports nothing of
// hangar's.
package serving

import "sync"

// InFlight counts what is in flight (requests, calls) and tells when none is; once closed it
// admits nothing more, so that a drain ends. The zero value is ready to use.
type InFlight struct {
	mu     sync.Mutex // guards the fields below
	n      int
	closed bool
	zero   chan struct{} // closed when n drops to 0; nil while n is 0
}

// Enter counts one more in flight and reports true, or, once Close was called, counts nothing
// and reports false. Each true Enter needs its Leave.
func (f *InFlight) Enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
	return true
}

// Leave counts one fewer in flight.
func (f *InFlight) Leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 {
		close(f.zero)
		f.zero = nil
	}
}

// Close makes every Enter from now on refuse. What is in flight goes on.
func (f *InFlight) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// Idle returns a channel closed once nothing is in flight. After Close, that is for good.
func (f *InFlight) Idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.zero
}
