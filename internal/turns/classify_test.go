package turns

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/runlogtest"
)

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %s: %v", path, err)
	}
	return lines
}

func TestClassifyFixtures(t *testing.T) {
	t.Parallel()
	dir := runlogtest.Dir(t)
	cost := func(v float64) *float64 { return &v }
	cases := []struct {
		file string
		want Summary
	}{
		{"claude_ruff-fix_27-tool-calls_success.jsonl", Summary{Lines: 99, ToolCalls: 27, ToolErrors: 1, Results: 1, CostUSD: cost(0.84838925),
			LastCommand: "cargo test -p ruff_python_formatter -- remove_except_types_parens 2>&1", Result: "Perfect! The fix is complete"}},
		{"claude_ruff-fix_background-task_two-results.jsonl", Summary{Lines: 158, ToolCalls: 45, ToolErrors: 1, Results: 2, CostUSD: cost(1.7085402499999998),
			LastCommand: "rm /tmp/bobbin-eval-ruff-001-kulgfpr5/demo_starred_except.py", Result: "## ✅ Fix Complete"}},
		{"claude_error-max-turns_one-bash-call.jsonl", Summary{Lines: 9, ToolCalls: 1, Results: 1, IsError: true, CostUSD: cost(0.057817400000000005),
			LastCommand: "ls -la", Errors: []string{"Reached maximum number of turns (1)"}}},
		{"claude_unknown-model_api-error_is-error.jsonl", Summary{Lines: 3, Results: 1, IsError: true, CostUSD: cost(0),
			Result: "There's an issue with the selected model", Errors: []string{"model_not_found"}}},
		{"codex_exec_edit_file-change_failed-command.jsonl", Summary{Lines: 25, ToolCalls: 7, ToolErrors: 1, Results: 1,
			LastCommand: "/bin/zsh -lc 'python3 test_calc.py'", Result: "Added [test_calc.py]", InputTokens: 124998, OutputTokens: 1111}},
		{"codex_exec_one-command_completed.jsonl", Summary{Lines: 7, ToolCalls: 1, Results: 1,
			LastCommand: "/bin/bash -lc 'echo one'", Result: "done", InputTokens: 33075, OutputTokens: 168}},
		{"codex_exec_unknown-model_turn-failed.jsonl", Summary{Lines: 5, Results: 1, IsError: true, Result: `{"type":"error","status":400`,
			Errors: []string{"Model metadata for `definitely-not-a-real-model` not found.", `{"type":"error","status":400`}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			var s Summary
			for i, raw := range readLines(t, filepath.Join(dir, c.file)) {
				l := Classify(raw)
				// Every line is kept as written, with its own type.
				var head struct{ Type string }
				json.Unmarshal(raw, &head)
				if l.Invalid || l.Truncated || l.Type != head.Type || !bytes.Equal(l.Data, raw) {
					t.Fatalf("line %d: Classify = type %q invalid %v truncated %v, data changed %v; want the line as written",
						i+1, l.Type, l.Invalid, l.Truncated, !bytes.Equal(l.Data, raw))
				}
				s.Add(l)
			}
			checkSummary(t, s, c.want)
		})
	}
}

// checkSummary compares a summary with a wanted one; texts are compared by prefix.
func checkSummary(t *testing.T, got, want Summary) {
	t.Helper()
	if got.Lines != want.Lines || got.Invalid != want.Invalid || got.Truncated != want.Truncated || got.ToolCalls != want.ToolCalls ||
		got.ToolErrors != want.ToolErrors || got.Results != want.Results || got.IsError != want.IsError ||
		got.LastCommand != want.LastCommand || got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens {
		t.Errorf("summary = %+v\nwant      %+v", got, want)
	}
	if (got.CostUSD == nil) != (want.CostUSD == nil) || got.CostUSD != nil && *got.CostUSD != *want.CostUSD {
		t.Errorf("cost = %v, want %v", deref(got.CostUSD), deref(want.CostUSD))
	}
	if !strings.HasPrefix(got.Result, want.Result) || (want.Result == "") != (got.Result == "") {
		t.Errorf("result = %.80q, want it to start with %q", got.Result, want.Result)
	}
	if len(got.Errors) != len(want.Errors) {
		t.Fatalf("errors = %q, want %q", got.Errors, want.Errors)
	}
	for i := range want.Errors {
		if !strings.HasPrefix(got.Errors[i], want.Errors[i]) {
			t.Errorf("error %d = %.80q, want it to start with %q", i, got.Errors[i], want.Errors[i])
		}
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func TestClassifyOddLines(t *testing.T) {
	t.Parallel()
	huge := `{"type":"user","message":{"content":"` + strings.Repeat("é", MaxLineBytes) + `"}}`
	cases := []struct {
		name               string
		line               string
		typ                string
		data               string // "" : compare only the flags
		invalid, truncated bool
		wantItems          int
	}{
		{"unknown type passes through", `{"type":"system","subtype":"brand_new"}`, "system", `{"type":"system","subtype":"brand_new"}`, false, false, 0},
		{"no type", `{"hello":1}`, "", `{"hello":1}`, false, false, 0},
		{"not JSON", `Error: something broke`, TypeInvalid, `"Error: something broke"`, true, false, 0},
		{"a JSON array is not a line", `[1,2]`, TypeInvalid, `"[1,2]"`, true, false, 0},
		{"empty", ``, TypeInvalid, `""`, true, false, 0},
		{"half a line", `{"type":"assistant","mess`, TypeInvalid, `"{\"type\":\"assistant\",\"mess"`, true, false, 0},
		{"not UTF-8", "\xff\xfe{\"type\":1}", TypeInvalid, `{"base64":"//57InR5cGUiOjF9"}`, true, false, 0},
		{"over 1 MiB", huge, "user", "", false, true, 0},
		{"posing as hangar's turn.finished", `{"type":"turn.finished","status":"done","exit_code":0}`, "agent:turn.finished", `{"type":"turn.finished","status":"done","exit_code":0}`, false, false, 0},
		{"posing as an invalid line", `{"type":"invalid"}`, "agent:invalid", `{"type":"invalid"}`, false, false, 0},
		{"Codex's own turn.started", `{"type":"turn.started"}`, "turn.started", `{"type":"turn.started"}`, false, false, 0},
		{"a NUL in its type", `{"type":"a\u0000b"}`, "ab", `{"type":"a\u0000b"}`, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := Classify([]byte(c.line))
			if l.Type != c.typ || l.Invalid != c.invalid || l.Truncated != c.truncated || len(l.Items) != c.wantItems {
				t.Errorf("Classify = type %q invalid %v truncated %v items %d; want %q %v %v %d", l.Type, l.Invalid, l.Truncated, len(l.Items), c.typ, c.invalid, c.truncated, c.wantItems)
			}
			if c.data != "" && string(l.Data) != c.data {
				t.Errorf("data = %s, want %s", l.Data, c.data)
			}
			if !json.Valid(l.Data) {
				t.Errorf("data is not JSON: %.80s", l.Data)
			}
			if c.truncated {
				var s string
				if err := json.Unmarshal(l.Data, &s); err != nil || len(s) > MaxLineBytes || len(s) < MaxLineBytes-4 || !strings.HasPrefix(c.line, s) {
					t.Errorf("cut line: %d bytes, %v; want the line's first MiB, whole characters", len(s), err)
				}
			}
		})
	}
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}`))
	f.Add([]byte(`{"type":"item.completed","item":{"type":"command_execution","exit_code":1}}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		l := Classify(raw)
		if !json.Valid(l.Data) {
			t.Fatalf("data is not JSON: %q", l.Data)
		}
		var s Summary
		s.Add(l)
	})
}

// TestClassifySystemLines: Claude Code's start of a run and its API retries say what a person
// needs in a sentence; its other system lines say nothing.
func TestClassifySystemLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, kind, text string }{
		{`{"type":"system","subtype":"init","cwd":"/work/repo","model":"claude-sonnet-5","tools":[]}`, KindStart, "run started: model claude-sonnet-5, in /work/repo"},
		{`{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2400,"error_status":529,"error":"overloaded"}`, KindRetry,
			"API call failed, retry 3 of 10: overloaded (HTTP 529), in 2.4s"},
		{`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":512,"error_status":null,"error":"unknown"}`, KindRetry,
			"API call failed, retry 1 of 10: unknown, in 500ms"},
		{`{"type":"system","subtype":"hook_started","hook_name":"SessionStart"}`, "", ""},
	} {
		l := Classify([]byte(c.line))
		var kind, text string
		if len(l.Items) == 1 {
			kind, text = l.Items[0].Kind, l.Items[0].Text
		}
		if len(l.Items) > 1 || kind != c.kind || text != c.text {
			t.Errorf("Classify(%.60s) = %+v, want %s %q", c.line, l.Items, c.kind, c.text)
		}
	}
}
