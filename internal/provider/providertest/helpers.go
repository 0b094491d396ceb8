package providertest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Poll reports whether cond held within d, looking every interval: for the suites that drive a
// real hangar from outside (faults, hostile), where what they wait for is another process's.
func Poll(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tk.C
	}
	return true
}

// WaitFor is Poll that fails the test after d, naming what it waited for.
func WaitFor(t *testing.T, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(d, every, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Str is a decoded JSON value as text: a string as it is, a number without exponent, anything
// else as JSON ("" for null).
func Str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// RandHex is n random bytes in hex: a name no other run of a test uses.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// LastLines is the last n lines of s: the end of a log, for a failure's message.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
