package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const td = "github.com/hangar-dev/hangar/scripts/testrun/testdata/"

// TestRun runs packages that pass, fail, fail after their tests passed (as a leak check does)
// and do not compile: each ends with go test's line and event, and the run fails.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	ok, err := run(&out, t.TempDir(), 2, "1m", []string{"-vet=off"},
		[]string{"./testdata/pass", "./testdata/fail", "./testdata/exit1", "./testdata/broken", "./testdata/notests"})
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("run reported success with failing packages")
	}
	type key struct{ pkg, test, action string }
	seen := map[key]bool{}
	var pkgLines bytes.Buffer
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var ev struct{ Action, Package, Test, Output string }
		if err := json.Unmarshal(l, &ev); err != nil || ev.Action == "" {
			pkgLines.Write(l) // go test -c's own words
			pkgLines.WriteByte('\n')
			continue
		}
		seen[key{ev.Package, ev.Test, ev.Action}] = true
		if ev.Test == "" && ev.Action == "output" {
			pkgLines.WriteString(ev.Output)
		}
	}
	for _, k := range []key{
		{td + "pass", "TestPasses", "pass"},
		{td + "pass", "TestSkips", "skip"},
		{td + "pass", "", "pass"},
		{td + "fail", "TestFails", "fail"},
		{td + "fail", "", "fail"},
		{td + "exit1", "TestPasses", "pass"},
		{td + "exit1", "", "fail"},
		{td + "broken", "", "fail"},
	} {
		if !seen[k] {
			t.Errorf("no %s event for %s %s", k.action, k.pkg, k.test)
		}
	}
	for _, want := range []string{"ok  \t" + td + "pass\t", "FAIL\t" + td + "fail\t", "FAIL\t" + td + "exit1\t",
		"FAIL\t" + td + "broken [build failed]", "undefined: undefined", "leaked: a goroutine"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) && !bytes.Contains(pkgLines.Bytes(), []byte(want)) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if bytes.Contains(out.Bytes(), []byte("notests")) {
		t.Errorf("a package without tests was run:\n%s", out.String())
	}
}

// TestRunPasses: a run of passing packages succeeds, its binaries kept in the folder given.
func TestRunPasses(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	ok, err := run(&out, dir, 1, "1m", []string{"-vet=off"}, []string{"./testdata/pass"})
	if err != nil || !ok {
		t.Fatalf("run = %v, %v:\n%s", ok, err, out.String())
	}
	if _, err := os.Stat(dir + "/0/pass.test"); err != nil {
		t.Errorf("the test binary is not kept: %v", err)
	}
}
