// Package doctest keeps a table that a test generates in a docs page the same as the test's:
// the part of the page between two marker lines is the table, checked by the test and rewritten
// by it with HANGAR_UPDATE_DOCS=1 (the isolation matrix in security.md, the fault table in
// reliability.md).
package doctest

import (
	"os"
	"strings"
	"testing"
)

// Generated fails t when the part of the page at path between the lines begin and end is not
// want; with HANGAR_UPDATE_DOCS=1 it writes want there instead. rewrite is the command that
// does that, for the failure's sentence.
func Generated(t *testing.T, path, begin, end, want, rewrite string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the lines that delimit its generated table:\n%s\n%s", path, begin, end)
	}
	want = "\n" + want
	if doc[i+len(begin):j] == want {
		return
	}
	if os.Getenv("HANGAR_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated table in %s", path)
		return
	}
	t.Errorf("%s's generated table differs from the test's; run `%s` to rewrite it. The test's:\n%s", path, rewrite, want)
}
