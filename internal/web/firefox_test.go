package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// firefox finds Debian's firefox-esr, or skips (loudly) where there is none; CI installs it.
func firefox(t *testing.T) string {
	return findBrowser(t, "firefox-esr", "Firefox test", "firefox-esr", "firefox")
}

// bidi is a WebDriver BiDi session with a headless Firefox (the W3C protocol Firefox speaks
// itself: no driver in between), enough to load a page and run script in it.
type bidi struct {
	t    *testing.T
	cmd  *exec.Cmd
	conn *websocket.Conn
	ctx  string // the top-level browsing context

	mu      sync.Mutex
	next    int
	waiting map[int]chan bidiAnswer
	done    chan struct{}
	prompts chan string // the messages of the page's dialogs (confirm), once subscribed (dialogs)
}

type bidiAnswer struct {
	Type   string          `json:"type"` // success, error, event
	ID     *int            `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Msg    string          `json:"message"`
	Method string          `json:"method"` // an event's
	Params json.RawMessage `json:"params"` // an event's
}

// listening is what Firefox prints once its WebDriver BiDi server is up.
var listening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

func startFirefox(ctx context.Context, t *testing.T, exe string) *bidi {
	t.Helper()
	return startFirefoxWith(ctx, t, exe, "")
}

// startFirefoxWith starts a headless Firefox whose profile has the preferences userJS (user.js
// lines) and opens a WebDriver BiDi session with it.
func startFirefoxWith(ctx context.Context, t *testing.T, exe, userJS string) *bidi {
	t.Helper()
	profile := t.TempDir()
	if err := os.WriteFile(profile+"/user.js", []byte(userJS), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port", "0", "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+profile, "MOZ_CRASHREPORTER_DISABLE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start firefox: %v", err)
	}
	b := &bidi{t: t, cmd: cmd, waiting: map[int]chan bidiAnswer{}, done: make(chan struct{}), prompts: make(chan string, 4)}
	t.Cleanup(b.close)
	found := make(chan string, 1)
	var log strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var url string
	select {
	case url = <-found:
	case <-ctx.Done():
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("firefox did not start its WebDriver BiDi server:\n%s", log.String())
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, url+"/session", nil)
	if err != nil {
		t.Fatalf("connect to firefox at %s: %v", url, err)
	}
	b.conn = conn
	go b.read()
	// Dialogs (confirm) wait for the test to answer them (answerDialog), rather than being
	// dismissed as they open, the default.
	b.call(ctx, "session.new", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"unhandledPromptBehavior": map[string]any{"default": "ignore"}}}}, nil)
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	b.call(ctx, "browsingContext.getTree", map[string]any{}, &tree)
	if len(tree.Contexts) == 0 {
		t.Fatal("firefox has no browsing context")
	}
	b.ctx = tree.Contexts[0].Context
	return b
}

func (b *bidi) read() {
	defer close(b.done)
	for {
		var a bidiAnswer
		if err := b.conn.ReadJSON(&a); err != nil {
			return
		}
		if a.ID == nil { // an event
			var prompt struct {
				Message string `json:"message"`
			}
			if a.Method == "browsingContext.userPromptOpened" && json.Unmarshal(a.Params, &prompt) == nil {
				select {
				case b.prompts <- prompt.Message:
				default: // more dialogs than the test answers: it fails waiting for them
				}
			}
			continue
		}
		b.mu.Lock()
		ch := b.waiting[*a.ID]
		delete(b.waiting, *a.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
}

// call sends a command and decodes its result into out (when set); an error answer fails the
// test.
func (b *bidi) call(ctx context.Context, method string, params, out any) {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan bidiAnswer, 1)
	b.waiting[id] = ch
	err := b.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	b.mu.Unlock()
	if err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	select {
	case a := <-ch:
		if a.Type == "error" {
			b.t.Fatalf("%s: %s: %s", method, a.Error, a.Msg)
		}
		if out != nil {
			if err := json.Unmarshal(a.Result, out); err != nil {
				b.t.Fatalf("%s: %v in %s", method, err, a.Result)
			}
		}
	case <-b.done:
		b.t.Fatalf("%s: firefox closed the connection", method)
	case <-ctx.Done():
		b.t.Fatalf("%s: %v", method, ctx.Err())
	}
}

// eval runs a JavaScript expression in the page and returns its value as a string.
func (b *bidi) eval(ctx context.Context, expr string) string {
	b.t.Helper()
	return b.evaluate(ctx, "String("+expr+")")
}

// evaluate runs a JavaScript expression whose value is a string (a promise of one awaited) and
// returns it.
func (b *bidi) evaluate(ctx context.Context, expr string) string {
	b.t.Helper()
	var r struct {
		Type   string `json:"type"`
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call(ctx, "script.evaluate", map[string]any{"expression": expr, "target": map[string]any{"context": b.ctx},
		"awaitPromise": true}, &r)
	if r.Type != "success" {
		b.t.Fatalf("evaluate %.200s: %s", expr, r.ExceptionDetails.Text)
	}
	s, _ := r.Result.Value.(string)
	return s
}

// evalJSON runs a JavaScript expression in the page (a promise awaited) and decodes its value,
// as JSON, into out.
func (b *bidi) evalJSON(ctx context.Context, expr string, out any) {
	b.t.Helper()
	if err := json.Unmarshal([]byte(b.evaluate(ctx, `(async () => JSON.stringify(await (`+expr+`)))()`)), out); err != nil {
		b.t.Fatalf("evaluate %.80s: %v", expr, err)
	}
}

// run runs a script (statements, such as a library's source) in the page.
func (b *bidi) run(ctx context.Context, script string) {
	b.t.Helper()
	var r struct {
		Type             string `json:"type"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call(ctx, "script.evaluate", map[string]any{"expression": script, "target": map[string]any{"context": b.ctx}, "awaitPromise": false}, &r)
	if r.Type != "success" {
		b.t.Fatalf("run a script of %d bytes: %s", len(script), r.ExceptionDetails.Text)
	}
}

// viewport sets the page's viewport to width × height CSS pixels.
func (b *bidi) viewport(ctx context.Context, width, height int) {
	b.t.Helper()
	b.call(ctx, "browsingContext.setViewport", map[string]any{"context": b.ctx, "viewport": map[string]any{"width": width, "height": height}}, nil)
	if got := b.eval(ctx, "innerWidth"); got != fmt.Sprint(width) {
		b.t.Fatalf("the viewport is %s px wide, want %d", got, width)
	}
}

// click clicks the element selector names once the current script has returned, so that a
// dialog the click opens (confirm) does not hold the call up.
func (b *bidi) click(ctx context.Context, selector string) {
	b.t.Helper()
	b.until(ctx, selector+" is there", fmt.Sprintf(`document.querySelector(%q) !== null`, selector))
	b.eval(ctx, fmt.Sprintf(`(setTimeout(() => document.querySelector(%q).click()), true)`, selector))
}

// answerDialog waits for the page's next dialog, answers it (accept: OK, else Cancel) and
// returns its message.
func (b *bidi) answerDialog(ctx context.Context, accept bool) string {
	b.t.Helper()
	select {
	case msg := <-b.prompts:
		b.call(ctx, "browsingContext.handleUserPrompt", map[string]any{"context": b.ctx, "accept": accept}, nil)
		return msg
	case <-ctx.Done():
		b.t.Fatal("the page opened no dialog")
		return ""
	}
}

// until evaluates expr every 50 ms until it is true, failing the test at ctx's end.
func (b *bidi) until(ctx context.Context, what, expr string) {
	b.t.Helper()
	for b.eval(ctx, expr) != "true" {
		select {
		case <-ctx.Done():
			b.t.Fatalf("%s: still not so at the deadline (status: %q)", what, b.eval(context.Background(), `document.getElementById("status").textContent`))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *bidi) close() {
	if b.conn != nil {
		b.conn.Close()
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd.Wait()
	if b.conn != nil {
		<-b.done
	}
}

// TestFleetPageFirefox loads the Fleet page in headless Firefox against a real hangar: signing
// in opens the live stream (ticket, EventSource), a job appears and changes state when its turn
// ends, its row says its task, how long it took and its tokens, its events open as hangar's
// lines (none as JSON), an inbox item is dismissed, and the job's address is opened, reloaded
// and left with Back (linksFirefox); hangar fleet --web's link signs a page in.
func TestFleetPageFirefox(t *testing.T) {
	t.Parallel()
	exe := firefox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	s, ada := serveAda(ctx, t)

	b := startFirefox(ctx, t, exe)
	b.call(ctx, "browsingContext.navigate", map[string]any{"context": b.ctx, "url": s.url + "/fleet/", "wait": "complete"}, nil)
	b.until(ctx, "the sign-in form shows", `!document.getElementById("signin").hidden`)
	b.eval(ctx, fmt.Sprintf(`(document.getElementById("token").value = %q, document.querySelector('#token-form button[type="submit"]').click(), true)`, ada))
	b.until(ctx, "live after signing in", `document.getElementById("status").textContent.startsWith("Live: ada's fleet.")`)

	job := s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box",
		"prompt": replay(t, "codex_exec_one-command_completed.jsonl")}))
	row := fmt.Sprintf(`document.querySelector('tr[data-id="%s"]')`, job["id"].(string))
	b.until(ctx, "the job appears", row+` !== null`)
	b.until(ctx, "its turn ends", row+`.classList.contains("state-done")`)
	b.until(ctx, "its row says what it was for, how long it took, the tokens it used (Codex: no cost)",
		row+`.querySelector(".task").textContent !== "" && `+row+`.querySelector(".time").textContent.startsWith("took ") && `+
			row+`.querySelector(".cost").textContent.endsWith(" tokens")`)
	b.eval(ctx, "("+row+".click(), true)")
	b.until(ctx, "its events open live", `document.querySelectorAll("#events li").length >= 5`)
	lines := `[...document.querySelectorAll("#events .line")]`
	b.until(ctx, "the command and its outcome read as lines, as in Chromium",
		lines+`.some((l) => l.textContent === "$ /bin/bash -lc 'echo one'") && `+lines+`.some((l) => l.textContent.trim() === "→ exit 0 one") && `+
			lines+`.some((l) => l.textContent === "tokens: 33075 in, 168 out")`)
	if n := b.eval(ctx, `String([...document.querySelectorAll("#events summary")].filter((s) => /[{[]"/.test(s.textContent)).length)`); n != "0" {
		t.Errorf("%s events of the detail read as raw JSON in Firefox", n)
	}
	if first := b.eval(ctx, `document.querySelector("#events li").textContent`); !strings.HasPrefix(first, "#1 ") {
		t.Errorf("the first event shown is %q, want #1", first)
	}
	item := fmt.Sprintf(`document.querySelector('#inbox li[data-id="job_finished:%s"]')`, job["id"].(string))
	b.until(ctx, "the finished job is in the inbox", item+` !== null`)
	b.eval(ctx, "("+item+`.querySelector("button.dismiss").click(), true)`)
	b.until(ctx, "the item is dismissed", item+` === null`)
	if got := s.API(t, "GET", "/api/fleet", ada, "")["inbox"]; strings.Contains(mustJSON(got), job["id"].(string)) {
		t.Errorf("the server still has the dismissed item: %v", got)
	}
	linksFirefox(ctx, t, b, job["id"].(string))

	// hangar fleet --web's link signs a page in, and leaves its address, in Firefox too.
	ticket := s.API(t, "POST", "/api/fleet/sign-in-tickets", ada, "")["ticket"].(string)
	b.call(ctx, "browsingContext.navigate", map[string]any{"context": b.ctx, "url": "about:blank", "wait": "complete"}, nil)
	b.call(ctx, "browsingContext.navigate", map[string]any{"context": b.ctx, "url": s.url + "/fleet/#ticket=" + ticket, "wait": "complete"}, nil)
	b.until(ctx, "live, signed in by the link", `document.getElementById("status").textContent.startsWith("Live: ada's fleet.")`)
	if href := b.eval(ctx, `location.href`); href != s.url+"/fleet/" {
		t.Errorf("the address after signing in by the link is %q, want %s/fleet/", href, s.url)
	}
}
