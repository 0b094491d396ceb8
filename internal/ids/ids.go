// Package ids makes the random ids hangar gives what it creates (processes, tokens, sessions,
// turns, jobs, OAuth clients and grants, replicas, execs' daemon tags, watchers): one helper,
// on crypto/rand, for every id. Secrets (tokens, tickets, keys) are not ids and are made where
// they are used.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// New returns prefix and n random characters of crypto/rand.Text, lowercased: letters a-z and
// digits 2-7, 5 bits each, safe in a path, a URL, a shell word and a DNS label. n is at most 26
// (130 bits).
func New(prefix string, n int) string {
	return prefix + strings.ToLower(rand.Text()[:n])
}

// Hex returns prefix and n random hexadecimal digits (4 bits each): the form of the ids whose
// form clients and the docs already show (process ids "p_" and 12 digits, token ids "tok_" and
// 16), kept so that none changes. n is at most 32.
func Hex(prefix string, n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b) // never fails (crypto/rand's documented contract)
	return prefix + hex.EncodeToString(b)[:n]
}
