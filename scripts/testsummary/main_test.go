package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSummarise(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestDB","Output":"=== RUN   TestDB\n"}`,
		`{"Action":"output","Package":"p","Test":"TestDB","Output":"    db_test.go:9: no HANGAR_TEST_DATABASE_URL\n"}`,
		`{"Action":"output","Package":"p","Test":"TestDB","Output":"--- SKIP: TestDB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestDB"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: got 1, want 2\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"PASS\n"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}`,
		`{"Action":"pass","Package":"q"}`,
	}, "\n")
	var out strings.Builder
	c, failed, err := summarise(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c != (counts{passed: 1, failed: 1, skipped: 1}) || !failed {
		t.Errorf("counts %+v, failed %v", c, failed)
	}
	want := "    b_test.go:3: got 1, want 2\n--- FAIL: TestB (0.00s)\nFAIL\tp\t0.01s\nok  \tq\t0.01s\n" +
		"\n1 skipped (run with the services .ci/run starts to run them):\nSKIP p TestDB: db_test.go:9: no HANGAR_TEST_DATABASE_URL\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
