package streamtest

import (
	"bytes"
	"runtime"
	"strconv"
)

// Goroutine is the calling goroutine's id, read from its stack's first line ("goroutine 7
// [..."): for tests of which goroutine did what.
func Goroutine() int {
	var buf [64]byte
	f := bytes.Fields(buf[:runtime.Stack(buf[:], false)])
	id, _ := strconv.Atoi(string(f[1]))
	return id
}
