package envd_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// TestFiles round-trips a file through /files and exercises the filesystem service.
func TestFiles(t *testing.T) {
	t.Parallel()
	for _, n := range networks {
		t.Run(string(n), func(t *testing.T) {
			workdir := t.TempDir()
			td := startDaemon(t, n, daemon.Config{Workdir: workdir})
			c := newClient(t, td, envd.Config{})
			ctx := testCtx(t, shortWait)

			payload := make([]byte, 3<<20+17)
			if _, err := rand.Read(payload); err != nil {
				t.Fatal(err)
			}
			abs := filepath.Join(workdir, "a", "b", "data.bin")
			if err := c.Upload(ctx, "a/b/data.bin", bytes.NewReader(payload)); err != nil {
				t.Fatal(err)
			}
			if onDisk, err := os.ReadFile(abs); err != nil || !bytes.Equal(onDisk, payload) {
				t.Fatalf("the uploaded file on disk: %d bytes, %v", len(onDisk), err)
			}
			rc, err := c.Download(ctx, abs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("download: %d bytes, %v", len(got), err)
			}
			if _, err := c.Download(ctx, "missing.txt"); !errors.Is(err, envd.ErrNotFound) {
				t.Errorf("download a missing file: got %v, want ErrNotFound", err)
			}
			if _, err := c.Download(ctx, "a"); !errors.Is(err, envd.ErrInvalidArgument) {
				t.Errorf("download a directory: got %v, want ErrInvalidArgument", err)
			}

			fi, err := c.Stat(ctx, "a/b/data.bin")
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size != int64(len(payload)) || fi.Dir || fi.Name != "data.bin" || fi.Path != abs {
				t.Errorf("stat: %+v", fi)
			}
			if err := c.MakeDir(ctx, "a/c"); err != nil {
				t.Fatal(err)
			}
			if err := c.MakeDir(ctx, "a/c"); !errors.Is(err, envd.ErrAlreadyExists) {
				t.Errorf("make an existing dir: got %v, want ErrAlreadyExists", err)
			}
			if err := c.Move(ctx, "a/b/data.bin", "a/c/moved.bin"); err != nil {
				t.Fatal(err)
			}
			list, err := c.ListDir(ctx, "a", 2)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range list {
				names = append(names, strings.TrimPrefix(e.Path, workdir+"/"))
			}
			if got, want := strings.Join(names, ","), "a/b,a/c,a/c/moved.bin"; got != want {
				t.Errorf("list: got %s, want %s", got, want)
			}
			if err := c.Remove(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Stat(ctx, "a"); !errors.Is(err, envd.ErrNotFound) {
				t.Errorf("stat a removed dir: got %v, want ErrNotFound", err)
			}
			if err := c.Remove(ctx, "a"); err != nil {
				t.Errorf("remove a missing path: %v, want success as on E2B's envd", err)
			}
		})
	}
}

// TestUploadMultipart checks the multipart form E2B's SDKs send.
func TestUploadMultipart(t *testing.T) {
	t.Parallel()
	workdir := t.TempDir()
	td := startDaemon(t, tcp, daemon.Config{Workdir: workdir})
	body := "--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\xff\r\n--XYZ--\r\n"
	res, err := http.Post(td.url+"/files?path=sub/notes.txt", "multipart/form-data; boundary=XYZ", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d %s", res.StatusCode, out)
	}
	want := `[{"path":"` + filepath.Join(workdir, "sub/notes.txt") + `","name":"notes.txt","type":"file"}]`
	if strings.TrimSpace(string(out)) != want {
		t.Errorf("answer: got %s, want %s", out, want)
	}
	if got, err := os.ReadFile(filepath.Join(workdir, "sub/notes.txt")); err != nil || string(got) != "hello\xff" {
		t.Errorf("file: %q %v", got, err)
	}
}

// TestWatch checks WatchDir's events, recursive and not.
func TestWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	td := startDaemon(t, unix, daemon.Config{})
	c := newClient(t, td, envd.Config{})
	ctx := testCtx(t, shortWait)

	w, err := c.WatchDir(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	flat, err := c.WatchDir(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer flat.Close()

	// waitFor reads s until it sees op on name.
	waitFor := func(s *envd.WatchStream, op envd.FileOp, name string) {
		t.Helper()
		for {
			ev, err := s.Next()
			if err != nil {
				t.Fatalf("waiting for %s %s: %v", op, name, err)
			}
			if ev.Op == op && ev.Name == name {
				return
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "top.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(w, envd.OpCreate, "top.txt")
	waitFor(w, envd.OpWrite, "top.txt")
	waitFor(flat, envd.OpCreate, "top.txt")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(w, envd.OpCreate, "sub")
	// The recursive watch adds sub when it sees it created; write until the event shows, as a
	// file created in the instant before the watch is added is not reported.
	nested := filepath.Join(dir, "sub", "nested.txt")
	for i := 0; ; i++ {
		if err := os.WriteFile(nested, []byte("y"), 0o644); err != nil {
			t.Fatal(err)
		}
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name == "sub/nested.txt" {
			break
		}
	}
	if err := os.Remove(filepath.Join(dir, "top.txt")); err != nil {
		t.Fatal(err)
	}
	waitFor(w, envd.OpRemove, "top.txt")
	// The flat watch reports top.txt's removal and nothing from sub/ before it.
	for {
		ev, err := flat.Next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(ev.Name, "sub/") {
			t.Fatalf("a non-recursive watch reported %s %s", ev.Op, ev.Name)
		}
		if ev.Op == envd.OpRemove && ev.Name == "top.txt" {
			break
		}
	}

	if _, err := c.WatchDir(ctx, filepath.Join(dir, "missing"), false); !errors.Is(err, envd.ErrNotFound) {
		t.Errorf("watch a missing dir: got %v, want ErrNotFound", err)
	}
}

// TestWatchKeepalive checks a silent watch sends keepalives.
func TestWatchKeepalive(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, tcp, daemon.Config{})
	c := newClient(t, td, envd.Config{KeepaliveInterval: 1e9})
	ctx := testCtx(t, shortWait)
	w, err := c.WatchDir(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ev, err := w.Next()
	if err != nil || ev.Op != envd.OpKeepalive {
		t.Fatalf("got %+v %v, want a keepalive", ev, err)
	}
}
