package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
	"github.com/hangar-dev/hangar/internal/runlogtest"
)

// hangarBin is the built hangar binary the browser test serves the page with.
var hangarBin string

// TestMain builds hangar, and hangar-envd beside it (what its local sandboxes run); the tests
// share one Chromium, closed after them.
func TestMain(m *testing.M) { os.Exit(providertest.MainWithHangar(closingBrowser{m}, &hangarBin)) }

// waitTimeout bounds every wait of the browser test.
const waitTimeout = 60 * time.Second

// server is a `hangar serve` process on a fixed loopback port, restartable on it.
type server struct {
	t   *testing.T
	url string
	*providertest.Serve
}

// start starts the server, again on its port, and waits until it is ready.
func (s *server) start(ctx context.Context) {
	s.t.Helper()
	if err := s.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
}

// replay is a command-agent prompt that prints a fixture run log a line every 100 ms.
func replay(t *testing.T, name string) string {
	t.Helper()
	p := runlogtest.Path(t, name)
	return fmt.Sprintf("while IFS= read -r l; do printf '%%s\\n' \"$l\"; sleep 0.1; done < %s", p)
}

// serveAda starts a hangar with a token of ada's (scope user) and her sandbox "box", both
// gone when the test ends.
func serveAda(ctx context.Context, t *testing.T, args ...string) (*server, string) {
	t.Helper()
	proc, err := providertest.NewServe(hangarBin, t.TempDir(), append([]string{"--session-poll-seconds", "1"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, url: proc.URL, Serve: proc}
	t.Cleanup(s.Stop)
	s.start(ctx)
	admin, err := s.AdminToken()
	if err != nil {
		t.Fatal(err)
	}
	ada := s.API(t, "POST", "/api/tokens", admin, `{"user": "ada", "scopes": ["user"]}`)["token"].(string)
	s.API(t, "POST", "/api/sandboxes", ada, `{"name": "box"}`)
	// A local sandbox's daemon outlives its server: destroy it before the server stops (cleanups
	// run last first). The server may be stopped by then (a restart test): start it again.
	t.Cleanup(func() {
		if !s.Running() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			s.start(ctx)
		}
		s.API(t, "DELETE", "/api/sandboxes/box", ada, "")
	})
	return s, ada
}

// TestFleetPage loads the Fleet page in headless Chromium against a real hangar: a person signs
// in with a token, a job appears as it starts and changes state when its turn ends, its events
// open live, and the page carries on after the server restarts.
func TestFleetPage(t *testing.T) {
	t.Parallel()
	chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	s, ada := serveAda(ctx, t)
	bctx := newTab(t) // no timeout: each step below has its own
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, waitTimeout)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			status, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#status")))
			t.Fatalf("%s: %v (the page says %q)\nserver log:\n%s", what, err, status, s.Logs.String())
		}
	}
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitTimeout))
	}
	waitStatus := func(what, want string) {
		t.Helper()
		run(what, poll(fmt.Sprintf(`document.getElementById("status").textContent.startsWith(%q)`, want)))
	}
	value := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, waitTimeout)
		defer cancel()
		v, err := chromedp.Run(c, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	run("sign in",
		chromedp.Navigate(s.url+"/fleet/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), ada),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	)
	waitStatus("live after signing in", "Live: ada's fleet.")
	if stored := value("the token kept", chromedp.Evaluate[string](`sessionStorage.getItem("hangar-token")`)); stored != ada {
		t.Errorf("session storage holds %q, want the token", stored)
	}
	if href := value("the address", chromedp.Evaluate[string](`location.href`)); strings.Contains(href, ada) {
		t.Errorf("the token is in the address: %s", href)
	}

	job := s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box",
		"prompt": replay(t, "codex_exec_one-command_completed.jsonl")}))
	row := fmt.Sprintf(`tr[data-id=%q]`, job["id"].(string))
	run("the job appears", chromedp.WaitVisible(chromedp.CSS(row)))
	run("its turn ends", chromedp.WaitVisible(chromedp.CSS(row+".state-done")))
	run("its row says what it was for, how long it took, the tokens it used (Codex: no cost)",
		poll(fmt.Sprintf(`(() => { const r = document.querySelector(%q);
			return r.querySelector(".task").textContent !== "" && r.querySelector(".time").textContent.startsWith("took ") &&
				r.querySelector(".cost").textContent.endsWith(" tokens"); })()`, row)))
	run("its events open live",
		chromedp.Click(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS("#detail")),
		poll(`document.querySelectorAll("#events li").length >= 5`),
	)
	if first := value("the events", chromedp.Text(chromedp.CSS("#events li"))); !strings.HasPrefix(first, "#1 ") {
		t.Errorf("the first event shown is %q, want #1", first)
	}
	readableEvents(t, run, value, poll)
	// Its end is in the inbox; dismissed with the keyboard, it is gone, and stays gone after the
	// restart below (the dismissal is kept by the server).
	item := fmt.Sprintf(`#inbox li[data-id="job_finished:%s"]`, job["id"].(string))
	run("dismiss the finished job from the inbox",
		chromedp.WaitVisible(chromedp.CSS(item+" button.dismiss")),
		chromedp.Focus(chromedp.CSS(item+" button.dismiss")),
		chromedp.KeyEvent(kb.Enter),
		poll(fmt.Sprintf(`document.querySelector(%q) === null`, item)),
	)

	s.Stop()
	waitStatus("says the server is gone", "hangar does not answer")
	s.start(ctx)
	waitStatus("live again after the restart", "Live: ada's fleet.")
	if n := value("the inbox after the restart", chromedp.Evaluate[string](fmt.Sprintf(`String(document.querySelectorAll(%q).length)`, item))); n != "0" {
		t.Errorf("the dismissed item is back after the restart")
	}
	again := s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box",
		"prompt": replay(t, "claude_error-max-turns_one-bash-call.jsonl")}))
	run("a job started after the restart appears", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-id=%q]`, again["id"].(string)))))
	// Its thinking reads as one folded line, its signature nowhere on the page until its raw JSON
	// is opened.
	run("its thinking folded",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-id=%q]`, again["id"].(string)))),
		poll(`[...document.querySelectorAll("#events .line-thinking")].some((l) => l.textContent === "(thinking)")`),
		poll(`[...document.querySelectorAll("#events .line")].some((l) => l.textContent.startsWith("result: error max turns"))`),
	)
	if text := value("the page's text", chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(text, `"signature"`) {
		t.Errorf("the page shows a thinking block's signature:\n%s", text)
	}
	cancelFromPage(t, s, ada, bctx, run, value, poll)

	run("open the first job again", chromedp.Click(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.CSS("#detail")),
		poll(`document.querySelectorAll("#events li").length >= 5`))
	c, ccancel := context.WithTimeout(bctx, waitTimeout)
	defer ccancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	saveScreenshot(t, png)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// saveScreenshot keeps the page's picture as a test artifact (HANGAR_TEST_ARTIFACTS, else the
// system's temporary directory), and as docs/img/fleet.png with HANGAR_UPDATE_DOCS=1.
func saveScreenshot(t *testing.T, png []byte) {
	t.Helper()
	dir := os.Getenv("HANGAR_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "hangar-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fleet.png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	if os.Getenv("HANGAR_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "fleet.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Helpers of TestFleetPage's steps: run runs steps (failing the test with what the page says),
// value reads one, poll waits for a JavaScript expression to hold.
type (
	runFunc   func(what string, steps ...chromedp.Action[chromedp.Void])
	valueFunc func(what string, a chromedp.Action[string]) string
	pollFunc  func(expr string) chromedp.Action[chromedp.Void]
)

// readableEvents checks the open detail of the Codex job (one command, echo one): its events
// read as hangar's lines, none of them JSON, and an event's raw JSON opens with a click.
func readableEvents(t *testing.T, run runFunc, value valueFunc, poll pollFunc) {
	t.Helper()
	lines := `[...document.querySelectorAll("#events .line")]`
	run("the command and its outcome read as lines",
		poll(lines+`.some((l) => l.textContent === "$ /bin/bash -lc 'echo one'")`),
		poll(lines+`.some((l) => l.textContent.trim() === "→ exit 0 one")`),
		poll(lines+`.some((l) => l.textContent === "tokens: 33075 in, 168 out")`),
	)
	if n := value("events shown as JSON", chromedp.Evaluate[string](
		`String([...document.querySelectorAll("#events summary")].filter((s) => /[{[]"/.test(s.textContent)).length)`)); n != "0" {
		t.Errorf("%s events of the detail read as raw JSON", n)
	}
	run("the command's raw JSON, a click away",
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#events li")].find((li) => li.querySelector(".line-tool_call")).id = "command-event"`),
		chromedp.Click(chromedp.CSS("#command-event summary")),
		poll(`document.querySelector("#command-event pre.raw").textContent.includes('"type": "command_execution"')`),
	)
}

// cancelFromPage starts a job that would run for ten minutes and cancels it from the page: the
// row's Cancel asks first, saying it cannot be undone (and a No leaves the job running); the
// detail's Cancel, confirmed, ends the job cancelled, in the row, the detail's events and the API.
func cancelFromPage(t *testing.T, s *server, ada string, bctx context.Context, run runFunc, value valueFunc, poll pollFunc) {
	t.Helper()
	asked, answers := dialogs(t, bctx)
	job := s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box", "prompt": "sleep 600"}))
	id := job["id"].(string)
	row := fmt.Sprintf(`tr[data-id=%q]`, id)
	run("the long job runs, with a Cancel", chromedp.WaitVisible(chromedp.CSS(row+".state-running button.cancel")))
	title := value("the detail's title", chromedp.Text(chromedp.CSS("#detail-title")))

	answers <- false
	run("cancel from its row, then not", chromedp.Click(chromedp.CSS(row+" button.cancel")))
	if msg := asked(); !strings.Contains(msg, "cannot be undone") {
		t.Errorf("the page asked %q, which does not say a cancel cannot be undone", msg)
	}
	if got := value("the row's button", chromedp.Text(chromedp.CSS(row+" button.cancel"))); got != "Cancel" {
		t.Errorf("after No, the row's button reads %q, want Cancel", got)
	}
	if got := value("the detail's title", chromedp.Text(chromedp.CSS("#detail-title"))); got != title {
		t.Errorf("the row's Cancel opened the detail: %q", got)
	}
	if st := s.API(t, "GET", "/api/jobs/"+id, ada, "")["state"]; st != "running" {
		t.Errorf("after No, the job is %v, want running", st)
	}

	answers <- true
	run("cancel from its detail",
		chromedp.Click(chromedp.CSS(row+" td.name")),
		chromedp.WaitVisible(chromedp.CSS("#detail-cancel button.cancel")),
		chromedp.Click(chromedp.CSS("#detail-cancel button.cancel")),
	)
	asked()
	run("the job ends cancelled",
		chromedp.WaitVisible(chromedp.CSS(row+".state-cancelled")),
		poll(`document.querySelector("#detail-cancel button") === null`),
		poll(`[...document.querySelectorAll("#events .line-turn")].some((l) => l.textContent.startsWith("── turn cancelled"))`),
	)
	if st := s.API(t, "GET", "/api/jobs/"+id, ada, "")["state"]; st != "cancelled" {
		t.Errorf("the job is %v, want cancelled", st)
	}
}

// dialogs answers the page's dialogs (confirm) with what is sent on answers, one each; asked
// returns the next one's message, failing the test when none opens within waitTimeout.
func dialogs(t *testing.T, bctx context.Context) (asked func() string, answers chan<- bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(bctx)
	msgs, replies, done := make(chan string, 4), make(chan bool, 4), make(chan struct{})
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		defer close(done)
		for d, err := range opening {
			if err != nil {
				return
			}
			msgs <- d.Message
			var accept bool
			select {
			case accept = <-replies:
			case <-ctx.Done():
				return
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept}); err != nil && ctx.Err() == nil {
				t.Errorf("answer the dialog %q: %v", d.Message, err)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		t.Helper()
		wait, stop := context.WithTimeout(ctx, waitTimeout)
		defer stop()
		select {
		case m := <-msgs:
			return m
		case <-wait.Done():
			t.Fatal("the page opened no dialog")
			return ""
		}
	}, replies
}
