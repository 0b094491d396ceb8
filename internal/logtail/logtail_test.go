package logtail

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

// follow starts Follow on path from offset, its output read line by line from the returned
// reader; wait returns Follow's error.
func follow(t *testing.T, ctx context.Context, path string, offset int64, until string) (*bufio.Reader, func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Follow(ctx, path, offset, until, pw)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() { pr.Close() })
	return bufio.NewReader(pr), func() error {
		go io.Copy(io.Discard, pr) // what is left, so a last write does not block
		return <-done
	}
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	l, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read a line: %v (got %q)", err, l)
	}
	return l
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestFollowWritesAsAppended: bytes from the offset, then each append as it is made; --until's
// file ends it once everything before it is out.
func TestFollowWritesAsAppended(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	log, status := filepath.Join(dir, "run.log"), filepath.Join(dir, "status.json")
	appendTo(t, log, "skipped\nfirst\n")
	r, wait := follow(t, ctx, log, int64(len("skipped\n")), status)
	if l := readLine(t, r); l != "first\n" {
		t.Fatalf("first line %q", l)
	}
	for _, l := range []string{"two\n", "three\n"} {
		appendTo(t, log, l) // each line reaches the reader before the next is written
		if got := readLine(t, r); got != l {
			t.Fatalf("got %q, want %q", got, l)
		}
	}
	appendTo(t, log, "last\n")
	appendTo(t, status, "{}\n")
	if got := readLine(t, r); got != "last\n" {
		t.Fatalf("got %q, want the last line", got)
	}
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("after the status file: %v, want the end", err)
	}
	if err := wait(); err != nil {
		t.Errorf("Follow = %v, want nil once the status file exists", err)
	}
}

// TestFollowEndsWhenTheFileChanges: truncated, replaced or removed, the file is no longer
// followed: ErrChanged.
func TestFollowEndsWhenTheFileChanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, path string) { os.Truncate(path, 2) }},
		{"replaced", func(t *testing.T, path string) {
			appendTo(t, path+".new", "another file, longer than the first\n")
			os.Rename(path+".new", path)
		}},
		{"removed", func(t *testing.T, path string) { os.Remove(path) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			log := filepath.Join(t.TempDir(), "run.log")
			appendTo(t, log, "one\n")
			r, wait := follow(t, ctx, log, 0, "")
			readLine(t, r)
			c.change(t, log)
			if err := wait(); !errors.Is(err, ErrChanged) {
				t.Errorf("Follow = %v, want ErrChanged", err)
			}
		})
	}
}

// TestMainBadInput: a bad offset or no file is refused with a sentence.
func TestMainBadInput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-c", "5", "f"}, {"-c", "+0", "f"}, {"-c", "+x", "f"}, {}, {"a", "b"}} {
		if err := Main(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("Main(%q) = nil, want an error", args)
		}
	}
	err := Main(context.Background(), []string{filepath.Join(t.TempDir(), "missing")}, io.Discard, io.Discard)
	if err == nil || errors.Is(err, ErrChanged) {
		t.Errorf("a missing file: %v, want an error that is not ErrChanged", err)
	}
}
