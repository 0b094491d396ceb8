package serving

import "net/http"

// stackReserve is the frame growStack takes: with the few frames above it, it makes the runtime
// grow the goroutine's stack to 32 KiB in one step (a stack grows to the power of two that holds
// the frame that did not fit).
const stackReserve = 16 << 10

// GrowStack grows the stack of the goroutine serving a request to 32 KiB before the request
// goes any deeper. An API request's goroutine (net/http's, a new one for each connection)
// starts with a 2 KiB stack and needs about 16 KiB by the time it reads the store (SQLite's
// interpreter alone takes 2.4 KiB a frame); grown by doubling, the stack is copied four times
// on the way, each copy walking every frame on it, the deepest ones included. Grown here, while
// the stack is a dozen frames deep, it is copied once. The cost it saves is a stream's fixed
// cost (bench/README.md: CPU); a goroutine whose stack is already large enough pays only for
// zeroing the frame.
func GrowStack(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		growStack()
		next.ServeHTTP(w, r)
	})
}

//go:noinline
func growStack() {
	var reserve [stackReserve]byte
	keep(reserve[:])
}

// keep is a call the compiler cannot see through, so that growStack's frame is not optimised
// away.
//
//go:noinline
func keep([]byte) {}
