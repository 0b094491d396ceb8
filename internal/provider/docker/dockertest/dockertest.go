// Package dockertest gives tests a Docker engine and small images that need no registry: they
// are imported from files of the machine running the tests (a static busybox, and bash with its
// libraries).
package dockertest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// The images the package makes.
const (
	// BashImage has busybox (as /bin/sh and the usual tools) and bash.
	BashImage = "hangar-test:busybox-bash"
	// BusyboxImage has busybox only: no bash, so commands run with sh -c.
	BusyboxImage = "hangar-test:busybox"
	// NoPasswdImage is BusyboxImage without /etc/passwd and /etc/group: no user has a name.
	NoPasswdImage = "hangar-test:busybox-no-passwd"
)

// busyboxPath is the static busybox both images are made of.
const busyboxPath = "/bin/busybox"

// Client returns a client of the local engine (the default socket), with API version
// negotiation, closed when the test ends. When no engine answers it skips the test, loudly;
// when the environment variable CI is "true" it fails it instead.
func Client(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost("unix:///var/run/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		tb.Fatalf("new docker client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		msg := fmt.Sprintf("NO DOCKER ENGINE at unix:///var/run/docker.sock (%v): Docker tests NOT RUN; start dockerd to run them", err)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return cli
}

var (
	mu    sync.Mutex
	built = map[string]error{} // images made by this process, and how that went
)

// EnsureImage makes BashImage on the engine, once per process, and returns its name.
func EnsureImage(ctx context.Context, cli *client.Client) (string, error) {
	return ensure(ctx, cli, BashImage, true, true)
}

// EnsureBusyboxImage makes BusyboxImage on the engine, once per process, and returns its name.
func EnsureBusyboxImage(ctx context.Context, cli *client.Client) (string, error) {
	return ensure(ctx, cli, BusyboxImage, false, true)
}

// EnsureNoPasswdImage makes NoPasswdImage on the engine, once per process, and returns its name.
func EnsureNoPasswdImage(ctx context.Context, cli *client.Client) (string, error) {
	return ensure(ctx, cli, NoPasswdImage, false, false)
}

func ensure(ctx context.Context, cli *client.Client, ref string, withBash, withPasswd bool) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if err, ok := built[ref]; ok {
		return ref, err
	}
	err := importImage(ctx, cli, ref, withBash, withPasswd)
	built[ref] = err
	return ref, err
}

// importImage makes ref from a root file system built in memory.
func importImage(ctx context.Context, cli *client.Client, ref string, withBash, withPasswd bool) error {
	rootfs, err := rootFS(withBash, withPasswd)
	if err != nil {
		return fmt.Errorf("make image %s: %w", ref, err)
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`CMD ["/bin/sh"]`, "ENV PATH=/usr/local/bin:/usr/bin:/bin"}})
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	defer rc.Close()
	// The engine reports an import's failure in the stream, not the status.
	out, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("import image %s: %s", ref, out)
	}
	return nil
}

// rootFS is a tar of the image's files.
func rootFS(withBash, withPasswd bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"etc", 0o755}, {"root", 0o700}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"proc", 0o755}, {"dev", 0o755}, {"sys", 0o755}}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name + "/", Mode: d.mode}); err != nil {
			return nil, err
		}
	}
	if err := addFile(tw, busyboxPath, "bin/busybox"); err != nil {
		return nil, err
	}
	applets, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a == "busybox" || a == "bash" {
			continue // bash is the real one, or none at all
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/bin/env", Linkname: "/bin/busybox", Mode: 0o777}); err != nil {
		return nil, err
	}
	etc := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	if !withPasswd {
		etc = nil
	}
	for name, text := range etc {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(text))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(text)); err != nil {
			return nil, err
		}
	}
	if withBash {
		bash, err := exec.LookPath("bash")
		if err != nil {
			return nil, fmt.Errorf("find bash: %w", err)
		}
		if err := addFile(tw, bash, "bin/bash"); err != nil {
			return nil, err
		}
		libs, err := sharedLibraries(bash)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, lib := range libs {
			if err := addParents(tw, lib, seen); err != nil {
				return nil, err
			}
			if err := addFile(tw, lib, strings.TrimPrefix(lib, "/")); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sharedLibraries lists, with ldd, the libraries and loader a binary needs, at the paths the
// loader looks for them.
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	if len(libs) == 0 {
		return nil, errors.New("ldd " + bin + ": no libraries found")
	}
	return libs, nil
}

// addParents adds the folders above p not yet in the tar.
func addParents(tw *tar.Writer, p string, seen map[string]bool) error {
	dir := path.Dir(strings.TrimPrefix(p, "/"))
	var parents []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		if seen[d] || d == "bin" || d == "usr" || d == "usr/bin" || d == "etc" {
			continue
		}
		seen[d] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	return nil
}

// addFile adds the file at src (following symlinks) to the tar as name.
func addFile(tw *tar.Writer, src, name string) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(b))}); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}
