// Command testrun is `go test -json` for `make test`, with each package's test binary built by
// `go test -c` into a folder that is kept (-o): `go test` links every test binary anew on each
// run (about 2 CPU-seconds each, a fifth of the suite's CPU), where go test -c leaves a binary
// in place whose sources have not changed since it was built.
//
//	testrun [-o DIR] [-p N] [-timeout D] -- [go test build flags] packages...
//
// It lists the packages that have tests, builds their binaries with one `go test -c` per set
// of distinct names (two packages' binaries may not share a name in one folder), then runs up
// to N of them at once (default: the number of CPUs, as go test), each in its package's folder
// under go's test2json, with GOROOT/bin first in PATH (as go test), and writes their
// events to standard output, a whole line at a time, ending each package with go test's own
// "ok" or "FAIL" line. The exit status is 1 when a build or a package failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// pkg is a package with tests and where its test binary is.
type pkg struct {
	ImportPath string
	Dir        string
	bin        string
}

func main() {
	parallel := flag.Int("p", runtime.NumCPU(), "test binaries run at once")
	binDir := flag.String("o", "", "folder to build the test binaries in, kept (go build rewrites only those that changed); none: a temporary one")
	timeout := flag.String("timeout", "10m", "each test binary's -test.timeout")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testrun [-o DIR] [-p N] [-timeout D] -- [go test build flags] packages...")
		flag.PrintDefaults()
	}
	flag.Parse()
	buildFlags, patterns := splitArgs(flag.Args())
	if len(patterns) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ok, err := run(os.Stdout, *binDir, *parallel, *timeout, buildFlags, patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// splitArgs splits go test's build flags (each starting with -, its value in the same
// argument: -gcflags=..., -ldflags=-w) from the package patterns.
func splitArgs(args []string) (flags, patterns []string) {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			patterns = append(patterns, a)
		}
	}
	return flags, patterns
}

func run(out io.Writer, dir string, parallel int, timeout string, buildFlags, patterns []string) (bool, error) {
	pkgs, err := list(patterns)
	if err != nil {
		return false, err
	}
	goroot, err := goEnv("GOROOT")
	if err != nil {
		return false, err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "testrun-"); err != nil {
			return false, err
		}
		defer os.RemoveAll(dir)
	} else if dir, err = filepath.Abs(dir); err != nil {
		return false, err
	}
	// test2json, go's own, is built on demand (the distribution ships few tools prebuilt) and
	// cached like the test binaries.
	test2json := filepath.Join(dir, "test2json")
	if b, err := exec.Command("go", "build", "-o", test2json, "cmd/test2json").CombinedOutput(); err != nil {
		return false, fmt.Errorf("go build cmd/test2json: %w: %s", err, b)
	}
	w := &lines{w: out}
	built := build(w, dir, buildFlags, pkgs)

	env := append(os.Environ(), "PATH="+filepath.Join(goroot, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	ok := built
	var mu sync.Mutex // guards ok
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for _, p := range pkgs {
		if _, err := os.Stat(p.bin); err != nil {
			// Its build failed: go test -c said why.
			w.event(p.ImportPath, "output", fmt.Sprintf("FAIL\t%s [build failed]\n", p.ImportPath))
			w.event(p.ImportPath, "fail", "")
			mu.Lock()
			ok = false
			mu.Unlock()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if !test(w, test2json, env, timeout, p) {
				mu.Lock()
				ok = false
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok, nil
}

// list returns the packages of patterns that have test files (the others have nothing to run).
func list(patterns []string) ([]*pkg, error) {
	args := append([]string{"list", "-e", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}\t{{.Dir}}{{end}}"}, patterns...)
	b, err := exec.Command("go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []*pkg
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if ip, d, ok := strings.Cut(l, "\t"); ok {
			pkgs = append(pkgs, &pkg{ImportPath: ip, Dir: d})
		}
	}
	return pkgs, nil
}

func goEnv(name string) (string, error) {
	b, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// build builds the packages' test binaries into dir, one go test -c per set of packages whose
// binaries' names (the import path's last element, .test) differ, and sets each package's bin.
// It reports whether every build succeeded; a failed one's errors are written as they came.
func build(w *lines, dir string, flags []string, pkgs []*pkg) bool {
	var sets [][]*pkg
	for _, p := range pkgs {
		name := path.Base(p.ImportPath) + ".test"
		i := 0
		for ; i < len(sets); i++ {
			if !hasBinary(sets[i], name) {
				break
			}
		}
		if i == len(sets) {
			sets = append(sets, nil)
		}
		p.bin = filepath.Join(dir, fmt.Sprint(i), name)
		sets[i] = append(sets[i], p)
	}
	ok := true
	for i, set := range sets {
		args := append([]string{"test", "-c", "-o", filepath.Join(dir, fmt.Sprint(i)) + string(filepath.Separator)}, flags...)
		for _, p := range set {
			args = append(args, p.ImportPath)
		}
		cmd := exec.Command("go", args...)
		var msg bytes.Buffer
		cmd.Stdout, cmd.Stderr = &msg, &msg
		if err := cmd.Run(); err != nil {
			ok = false
			w.raw(msg.String())
			if msg.Len() == 0 {
				w.raw(fmt.Sprintf("go test -c: %v\n", err))
			}
		}
	}
	return ok
}

func hasBinary(set []*pkg, name string) bool {
	for _, p := range set {
		if filepath.Base(p.bin) == name {
			return true
		}
	}
	return false
}

// test runs p's binary in p's folder under test2json, as go test -json does, and ends with go
// test's "ok" or "FAIL" line. It reports whether the package passed.
func test(w *lines, test2json string, env []string, timeout string, p *pkg) bool {
	start := time.Now()
	cmd := exec.Command(test2json, "-t", "-p", p.ImportPath,
		p.bin, "-test.v=test2json", "-test.paniconexit0", "-test.count=1", "-test.timeout="+timeout)
	cmd.Dir = p.Dir
	cmd.Env = env
	r, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				w.raw(line)
			}
			if err != nil {
				return
			}
		}
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	elapsed := time.Since(start).Seconds()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			w.event(p.ImportPath, "output", fmt.Sprintf("run %s: %v\n", p.bin, err))
		}
		w.event(p.ImportPath, "output", fmt.Sprintf("FAIL\t%s\t%.3fs\n", p.ImportPath, elapsed))
		return false
	}
	w.event(p.ImportPath, "output", fmt.Sprintf("ok  \t%s\t%.3fs\n", p.ImportPath, elapsed))
	return true
}

// lines writes whole lines to w, one writer at a time, so that the packages run at once do not
// cut into each other's lines.
type lines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lines) raw(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, s)
}

// event writes one go test -json event of a package (no test).
func (l *lines) event(pkg, action, output string) {
	b, _ := json.Marshal(struct {
		Time    time.Time
		Action  string
		Package string
		Output  string `json:",omitempty"`
	}{time.Now(), action, pkg, output})
	l.raw(string(b) + "\n")
}
