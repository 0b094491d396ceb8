package seal

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte(strings.Repeat("s", 64))

func TestSealOpen(t *testing.T) {
	t.Parallel()
	b, err := New(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	v := b.Seal("sk-ant-123", "ses_1/KEY")
	if strings.Contains(v, "sk-ant") || !Sealed(v) {
		t.Fatalf("sealed = %q", v)
	}
	if v2 := b.Seal("sk-ant-123", "ses_1/KEY"); v2 == v {
		t.Error("two seals of one value are the same (no fresh nonce)")
	}
	got, sealed, err := b.Open(v, "ses_1/KEY")
	if err != nil || !sealed || got != "sk-ant-123" {
		t.Fatalf("Open = %q %v %v", got, sealed, err)
	}
	// One character of the tag changed: the last but one, which always carries six bits of it
	// (the last may carry only two, and a fixed "AA" at the end was sometimes the seal itself:
	// a flake).
	swap := byte('A')
	if v[len(v)-2] == 'A' {
		swap = 'B'
	}
	altered := v[:len(v)-2] + string(swap) + v[len(v)-1:]
	other, _ := New([]byte(strings.Repeat("o", 64)), "test")
	otherPurpose, _ := New(secret, "another purpose")
	for name, try := range map[string]func() error{
		"another key":     func() error { _, _, err := other.Open(v, "ses_1/KEY"); return err },
		"another purpose": func() error { _, _, err := otherPurpose.Open(v, "ses_1/KEY"); return err },
		"another context": func() error { _, _, err := b.Open(v, "ses_2/KEY"); return err },
		"altered":         func() error { _, _, err := b.Open(altered, "ses_1/KEY"); return err },
		"not base64":      func() error { _, _, err := b.Open(prefix+"!!", "ses_1/KEY"); return err },
		"short":           func() error { _, _, err := b.Open(prefix+"AAAA", "ses_1/KEY"); return err },
	} {
		if err := try(); !errors.Is(err, ErrWrongKey) {
			t.Errorf("%s: err = %v, want ErrWrongKey", name, err)
		}
	}
	plain, sealed, err := b.Open("plain", "ses_1/KEY")
	if plain != "plain" || sealed || err != nil {
		t.Errorf("Open(plain) = %q %v %v, want it as it is", plain, sealed, err)
	}
}

func TestShortSecretRefused(t *testing.T) {
	t.Parallel()
	if _, err := New([]byte("short"), "test"); err == nil {
		t.Error("a 5-byte secret was taken")
	}
}
