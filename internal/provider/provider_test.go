package provider

import (
	"bytes"
	"os/exec"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under the limit", 8, []string{"ab", "cd"}, "abcd"},
		{"exactly the limit", 4, []string{"ab", "cd"}, "abcd"},
		{"one write past it", 4, []string{"abcdef"}, "cdef"},
		{"many writes past it", 4, []string{"ab", "cd", "ef", "g"}, "defg"},
		{"compaction", 3, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "fgh"},
		{"nothing", 4, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := TailBuffer{Max: tc.max}
			var total int
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				total += n
			}
			if string(b.Bytes()) != tc.want {
				t.Errorf("Bytes() = %q, want %q", b.Bytes(), tc.want)
			}
			if got, want := b.Dropped(), int64(total-len(tc.want)); got != want {
				t.Errorf("Dropped() = %d, want %d", got, want)
			}
		})
	}
}

func TestTailBufferDefault(t *testing.T) {
	t.Parallel()
	var b TailBuffer
	b.Write(bytes.Repeat([]byte("x"), MaxExecOutput+10))
	if len(b.Bytes()) != MaxExecOutput {
		t.Errorf("kept %d bytes, want MaxExecOutput", len(b.Bytes()))
	}
}

// FuzzTailBuffer: whatever the writes, the buffer keeps exactly the end of their concatenation.
func FuzzTailBuffer(f *testing.F) {
	f.Add([]byte("hello world"), uint8(3), uint8(4))
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk uint8) {
		if limit == 0 || chunk == 0 {
			return
		}
		b := TailBuffer{Max: int(limit)}
		for rest := data; len(rest) > 0; {
			n := min(int(chunk), len(rest))
			b.Write(rest[:n])
			rest = rest[n:]
		}
		want := data[max(0, len(data)-int(limit)):]
		if !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("Bytes() = %q, want %q", b.Bytes(), want)
		}
	})
}

// TestShellArgv: the command reaches the shell unquoted and unchanged, and the daemon's token
// does not reach it.
func TestShellArgv(t *testing.T) {
	t.Parallel()
	argv := ShellArgv(`printf '%s|' "$1" 'a b' "$HANGAR_ENVD_ACCESS_TOKEN"; echo "$0"`)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HANGAR_ENVD_ACCESS_TOKEN=secret"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "|a b||bash\n" {
		t.Errorf("output %q, want %q", out, "|a b||bash\n")
	}
}
