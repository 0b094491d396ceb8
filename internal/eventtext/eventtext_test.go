package eventtext_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/eventtext"
	"github.com/hangar-dev/hangar/internal/runlogtest"
	"github.com/hangar-dev/hangar/internal/turns/runlog"
	"github.com/hangar-dev/hangar/internal/wire"
)

// events reads a fixture run log as hangar records it: each line classified into its event.
func events(t *testing.T, path string) []wire.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 2*runlog.MaxLineBytes)
	var evs []wire.Event
	for sc.Scan() {
		l := runlog.Classify(sc.Bytes())
		evs = append(evs, wire.Event{Type: l.Type, Data: l.Data, Invalid: l.Invalid, Truncated: l.Truncated})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// fixtures are every Claude Code and Codex run log there is.
func fixtures(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(runlogtest.Dir(t), "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixture run logs (%v)", err)
	}
	return files
}

var kinds = []string{eventtext.KindTurn, eventtext.KindStart, eventtext.KindMessage, eventtext.KindThinking,
	eventtext.KindToolCall, eventtext.KindToolOutput, eventtext.KindResult, eventtext.KindUsage, eventtext.KindRetry,
	eventtext.KindError, eventtext.KindOther}

// TestFixturesReadAsLines: every line of every real run log reads as lines of a known kind,
// each one line of text and none of them the event's JSON (what a tool gave back may quote JSON
// the tool read, but never an object of the agent's own, all of which have a "type"); each thinking
// block and each of Codex's reasoning items is one "(thinking)" line, without its signature.
func TestFixturesReadAsLines(t *testing.T) {
	t.Parallel()
	for _, path := range fixtures(t) {
		name := filepath.Base(path)
		thoughts, folded := 0, 0
		for i, ev := range events(t, path) {
			signatures := thinking(ev)
			thoughts += len(signatures)
			for _, l := range eventtext.Lines(ev) {
				text := strings.TrimLeft(l.Text, " →✗")
				switch {
				case !slices.Contains(kinds, l.Kind):
					t.Errorf("%s:%d: kind %q is none of %q", name, i+1, l.Kind, kinds)
				case text == "" || strings.ContainsAny(l.Text, "\n\r"):
					t.Errorf("%s:%d: %q is not one line of text", name, i+1, l.Text)
				case strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[") || strings.Contains(l.Text, `"type":`) || strings.Contains(l.Text, `"type": `):
					t.Errorf("%s:%d: %q is raw JSON", name, i+1, l.Text)
				case !strings.HasPrefix(l.Text, "  ") && (strings.Contains(l.Text, `{"`) || strings.Contains(l.Text, `":`)):
					// Only what a tool gave back ("  → …", "  ✗ …") may quote JSON.
					t.Errorf("%s:%d: %q holds raw JSON", name, i+1, l.Text)
				}
				for _, sig := range signatures {
					if sig != "" && strings.Contains(l.Text, sig[:min(len(sig), 40)]) {
						t.Errorf("%s:%d: %q shows a thinking block's signature", name, i+1, l.Text)
					}
				}
				if l.Kind == eventtext.KindThinking {
					folded++
					if l.Text != "(thinking)" {
						t.Errorf("%s:%d: thinking reads %q, want (thinking)", name, i+1, l.Text)
					}
				}
			}
		}
		if folded != thoughts {
			t.Errorf("%s: %d thinking lines for %d thinking blocks and reasoning items", name, folded, thoughts)
		}
	}
}

// thinking is the signatures of ev's thinking blocks (Claude Code's; "" for Codex's reasoning
// items, which have none).
func thinking(ev wire.Event) []string {
	var m struct {
		Message struct {
			Content []struct{ Type, Signature string } `json:"content"`
		} `json:"message"`
		Item struct{ Type string } `json:"item"`
	}
	json.Unmarshal(ev.Data, &m)
	var sigs []string
	for _, b := range m.Message.Content {
		if b.Type == "thinking" {
			sigs = append(sigs, b.Signature)
		}
	}
	if ev.Type == "item.completed" && m.Item.Type == "reasoning" {
		sigs = append(sigs, "")
	}
	return sigs
}

// TestFixturesChosenLines: chosen lines of the real run logs read as a person would say them,
// in the order they came.
func TestFixturesChosenLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fixture string
		want    []string
	}{
		{"codex_exec_one-command_completed.jsonl", []string{
			"## メタ意図の推論 背景: シェル実行と応答形式の確認。目的: 指定コマンドを実行する。期待形式: 実行後、完全一致で `done`。",
			"$ /bin/bash -lc 'echo one'", "  → exit 0 one", "done", "tokens: 33075 in, 168 out"}},
		{"codex_exec_edit_file-change_failed-command.jsonl", []string{
			"$ /bin/zsh -lc 'rg --files'", "  → exit 0 calc.py README.md", "files: add /workspace/test_calc.py",
			"$ /bin/zsh -lc 'python3 -m pytest'", "  → exit 1 /opt/homebrew/opt/python@3.14/bin/python3.14: No module named pytest",
			"(thinking)", "files: update /workspace/test_calc.py"}},
		{"codex_exec_unknown-model_turn-failed.jsonl", []string{
			"error: The 'definitely-not-a-real-model' model is not supported when using Codex with a ChatGPT account. (HTTP 400)"}},
		{"claude_error-max-turns_one-bash-call.jsonl", []string{
			"run started: model claude-sonnet-5, in /Users/user/.local/state/md2okf-spike/claude/work/okf",
			"(thinking)", "$ ls -la", "result: error max turns (cost $0.0578)"}},
		{"claude_unknown-model_api-error_is-error.jsonl", []string{"error: model_not_found"}},
		{"claude_ruff-fix_27-tool-calls_success.jsonl", []string{
			"Grep except_handler", "Glob **/except*.rs", "$ cargo test -p ruff_python_formatter -- except_handler"}},
		{"claude_ruff-fix_background-task_two-results.jsonl", []string{
			"  ✗ File does not exist. Note: your current working directory is /tmp/bobbin-eval-ruff-001-kulgfpr5/astral-sh--ruff.",
			"background task started: Run prek validation",
			`Background command "Run prek validation" failed with exit code 1`}},
	}
	for _, c := range cases {
		var got []string
		for _, ev := range events(t, runlogtest.Path(t, c.fixture)) {
			for _, l := range eventtext.Lines(ev) {
				got = append(got, l.Text)
			}
		}
		i := 0
		for _, l := range got {
			if i < len(c.want) && l == c.want[i] {
				i++
			}
		}
		if i < len(c.want) {
			t.Errorf("%s: no line %q after %q; it reads:\n%s", c.fixture, c.want[i], c.want[:i], strings.Join(got, "\n"))
		}
	}
}

// TestLines: what the logs above do not hold — hangar's own events, lines that are not JSON or
// were cut, types of neither agent, a thinking block with its signature — reads as lines too,
// with their kinds.
func TestLines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ev   wire.Event
		want []wire.Line
	}{
		{"hangar's turn.started", wire.Event{Type: "turn.started", Turn: "turn_1", Data: json.RawMessage(`{"agent":"codex","turn":"turn_1","type":"turn.started"}`)},
			[]wire.Line{{Kind: "turn", Text: "── turn_1 started (codex)"}}},
		{"Codex's turn.started", wire.Event{Type: "turn.started", Data: json.RawMessage(`{"type":"turn.started"}`)}, nil},
		{"a turn done", wire.Event{Type: "turn.finished", Data: json.RawMessage(`{"exit_code":0,"status":"done","summary":{"cost_usd":1.71},"turn":"t","type":"turn.finished"}`)},
			[]wire.Line{{Kind: "turn", Text: "── turn done, exit 0, cost $1.7100"}}},
		{"a turn failed", wire.Event{Type: "turn.finished", Data: json.RawMessage(`{"exit_code":1,"reason":"exit code 1: tests failed","status":"failed","turn":"t","type":"turn.finished"}`)},
			[]wire.Line{{Kind: "error", Text: "── turn failed, exit 1: tests failed"}}},
		{"a line that is not JSON", wire.Event{Type: "invalid", Invalid: true, Data: json.RawMessage(`"npm ERR!   missing script: test"`)},
			[]wire.Line{{Kind: "other", Text: "npm ERR! missing script: test"}}},
		{"bytes that are not text", wire.Event{Type: "invalid", Invalid: true, Data: json.RawMessage(`{"base64":"AAECAw=="}`)},
			[]wire.Line{{Kind: "other", Text: "(a line of 4 bytes that are not text)"}}},
		{"a line cut", wire.Event{Type: "user", Truncated: true, Data: json.RawMessage(`"{\"type\":\"user\",\"message\":{\"content\":[{\"type\":\"tool_result\",\"content\":\"aaaa`)},
			[]wire.Line{{Kind: "other", Text: "(user line cut: too long to keep whole)"}}},
		{"a type of neither agent", wire.Event{Type: "progress", Data: json.RawMessage(`{"type":"progress","message":"halfway","pct":50}`)},
			[]wire.Line{{Kind: "other", Text: "progress: halfway"}}},
		{"thinking, with its signature", wire.Event{Type: "assistant", Data: json.RawMessage(`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"Let me look.","signature":"EpYCCkYIBxgCKkB"},{"type":"text","text":"Looking."}]}}`)},
			[]wire.Line{{Kind: "thinking", Text: "(thinking)"}, {Kind: "message", Text: "Looking."}}},
		{"a message whose content is a string", wire.Event{Type: "user", Data: json.RawMessage(`{"type":"user","message":{"role":"user","content":"Fix the tests."}}`)},
			[]wire.Line{{Kind: "message", Text: "Fix the tests."}}},
		{"a tool call without a command", wire.Event{Type: "assistant", Data: json.RawMessage(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"TodoWrite","input":{"todos":[{"content":"x"}]}}]}}`)},
			[]wire.Line{{Kind: "tool_call", Text: "TodoWrite"}}},
		{"a rate limit", wire.Event{Type: "rate_limit_event", Data: json.RawMessage(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1772254800}}`)},
			[]wire.Line{{Kind: "retry", Text: "rate limit: rejected, until 2026-02-28 05:00 UTC"}}},
		{"Codex's MCP tool call", wire.Event{Type: "item.started", Data: json.RawMessage(`{"type":"item.started","item":{"type":"mcp_tool_call","server":"hangar","tool":"exec","status":"in_progress"}}`)},
			[]wire.Line{{Kind: "tool_call", Text: "hangar.exec"}}},
	}
	for _, c := range cases {
		if got := eventtext.Lines(c.ev); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
