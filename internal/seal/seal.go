// Package seal encrypts small secrets that hangar keeps in its store (sessions' env) with a key
// derived from the control plane's secret: AES-256-GCM under an HKDF-SHA256 key of its own
// purpose, so the same secret keys process tags and sealed values without one revealing the
// other. A sealed value is text (a prefix and base64), so it fits the columns plain values had.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// prefix marks a sealed value; the version names the key derivation and the cipher.
const prefix = "hangar-sealed:v1:"

// ErrWrongKey is the answer to a sealed value that this key did not seal (another HANGAR_SECRET,
// another data dir's secret file) or that was altered.
var ErrWrongKey = errors.New("sealed with another key, or altered")

// Box seals and opens values under one derived key. It is safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// New derives purpose's key from secret (HKDF-SHA256, purpose as the info) and returns a Box
// over it.
func New(secret []byte, purpose string) (*Box, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("derive the %s key: the secret has %d bytes, at least 32 are needed", purpose, len(secret))
	}
	key, err := hkdf.Key(sha256.New, secret, nil, purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the %s key: %w", purpose, err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext bound to context (where the value belongs: it opens only with the same
// context, so a sealed value copied to another row does not open there).
func (b *Box) Seal(plaintext, context string) string {
	nonce := make([]byte, b.aead.NonceSize())
	rand.Read(nonce)
	out := b.aead.Seal(nonce, nonce, []byte(plaintext), []byte(context))
	return prefix + base64.RawStdEncoding.EncodeToString(out)
}

// Open decrypts a value Seal made with the same key and context. ErrWrongKey when it does not
// open; a value that is not sealed at all is returned as it is, with sealed false (values kept
// before hangar sealed them).
func (b *Box) Open(value, context string) (plaintext string, sealed bool, err error) {
	rest, ok := strings.CutPrefix(value, prefix)
	if !ok {
		return value, false, nil
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(raw) < b.aead.NonceSize() {
		return "", true, ErrWrongKey
	}
	n := b.aead.NonceSize()
	out, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(context))
	if err != nil {
		return "", true, ErrWrongKey
	}
	return string(out), true, nil
}

// Sealed reports whether value is a sealed value.
func Sealed(value string) bool { return strings.HasPrefix(value, prefix) }
