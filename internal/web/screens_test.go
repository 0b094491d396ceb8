package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// axeVersion is the axe-core the accessibility check runs, installed with npm into
// .cache/axe-core (gitignored) on first use: a test tool, never served by hangar.
const axeVersion = "4.14.1"

// TestFleetPageEveryScreen drives the Fleet page in headless Chromium with a running session
// (long names), a done job and a failed one: at 1,400, 390 and 320 px wide no element is wider
// than the viewport, and on a phone rows are cards below the inbox; axe-core finds no serious
// or critical violation in light or dark mode; Escape gives the keyboard back to the row and
// Dismiss to the next item (or the inbox's heading), also after the inbox is redrawn; opening
// an agent pushes its address, Back leaves it, a reload of it opens it again, and an address
// that names no agent says so.
// HANGAR_UPDATE_DOCS=1 writes the screenshots of docs/fleet.md to docs/img.
func TestFleetPageEveryScreen(t *testing.T) {
	t.Parallel()
	chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	s, ada := serveAda(ctx, t)
	p := openChromium(t, s)

	p.do("sign in",
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(s.url+"/fleet/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), ada),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	)
	p.until("live after signing in", `document.getElementById("status").textContent.startsWith("Live: ada's fleet.")`)
	p.fits(1400)
	p.docShot("fleet-empty")

	done, failed := busyFleet(t, s, ada)
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('#agents tr[data-id="%s"]')`, id) }
	sessionRow := fmt.Sprintf(`[...document.querySelectorAll("#agents tr")].find((tr) => tr.querySelector(".name").firstChild.textContent === %q)`, busySession)
	p.until("the session runs", sessionRow+`?.classList.contains("state-running") === true`)
	p.until("a job is done", row(done)+`?.classList.contains("state-done") === true`)
	p.until("a job failed", row(failed)+`?.classList.contains("state-failed") === true`)
	p.until("both jobs are in the inbox", `document.querySelectorAll("#inbox li").length === 2`)

	t.Run("layout", func(t *testing.T) {
		p := p.on(t)
		p.fits(1400)
		if !eval[bool](p, wideLayoutJS) {
			t.Error("at 1,400 px the agents are not a table with the inbox on their right")
		}
		p.docShot("fleet-busy")
		// A row's name is its cells, as a screen reader reads a table row: an aria-label would
		// replace them all.
		if labelled := eval[int](p, `document.querySelectorAll("#agents tr[aria-label]").length`); labelled > 0 {
			t.Errorf("%d rows have an aria-label, which hides their cells from a screen reader", labelled)
		}
		for _, width := range []int64{390, 320} {
			p.do("resize", chromedp.EmulateViewport(width, 800))
			p.fits(width)
			if !eval[bool](p, phoneLayoutJS) {
				t.Errorf("at %d px the rows are not cards below the inbox", width)
			}
			if width == 390 {
				p.docShot("fleet-mobile")
			}
		}
	})

	t.Run("axe", func(t *testing.T) {
		p := p.on(t)
		axe := axeSource(t)
		for _, scheme := range []string{"light", "dark"} {
			p.do("colour scheme "+scheme, colorScheme(scheme))
			if got := eval[bool](p, `matchMedia("(prefers-color-scheme: dark)").matches`); got != (scheme == "dark") {
				t.Fatalf("the page's prefers-color-scheme: dark is %v in %s mode", got, scheme)
			}
			for _, width := range []int64{1400, 390} {
				p.do("resize", chromedp.EmulateViewport(width, 900))
				if v := p.axe(axe); len(v) > 0 {
					t.Errorf("axe-core at %d px, %s mode: %d serious or critical violations:\n%s", width, scheme, len(v), strings.Join(v, "\n"))
				}
			}
			if scheme == "dark" {
				p.do("wide", chromedp.EmulateViewport(1400, 900))
				p.docShot("fleet-dark")
			}
		}
		p.do("light again", colorScheme("light"))
	})

	p.do("wide", chromedp.EmulateViewport(1400, 900))
	t.Run("escape", func(t *testing.T) {
		p := p.on(t)
		p.do("open the failed job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#agents tr[data-id=%q]`, failed))))
		p.until("its detail opens at its address", fmt.Sprintf(`!document.getElementById("detail").hidden && location.pathname === "/fleet/jobs/%s"`, failed))
		p.until("its events show", `document.querySelectorAll("#events li").length >= 2`)
		p.docShot("fleet-failed")
		p.do("escape", chromedp.KeyEvent(kb.Escape))
		p.until("the detail closes, the keyboard on its row, the address the fleet's",
			`document.getElementById("detail").hidden && document.activeElement === `+row(failed)+` && location.pathname === "/fleet/"`)
	})

	t.Run("back", func(t *testing.T) {
		p := p.on(t)
		p.do("open the session", chromedp.Click(chromedp.CSS(`#agents tr.state-running`)))
		p.until("its detail opens at its address", fmt.Sprintf(`!document.getElementById("detail").hidden && location.pathname === "/fleet/sessions/%s"`, busySession))
		p.eval(`history.back()`)
		p.until("Back closes it, the keyboard on its row",
			`document.getElementById("detail").hidden && location.pathname === "/fleet/" && document.activeElement === `+sessionRow)
	})

	t.Run("reload", func(t *testing.T) {
		p := p.on(t)
		p.do("open the done job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#agents tr[data-id=%q]`, done))))
		p.until("at its address", fmt.Sprintf(`location.pathname === "/fleet/jobs/%s"`, done))
		title := eval[string](p, `document.getElementById("detail-title").textContent`)
		p.do("reload", chromedp.Reload())
		p.until("the reloaded page opens the same detail once live", fmt.Sprintf(
			`document.getElementById("status").textContent.startsWith("Live") && !document.getElementById("detail").hidden && document.getElementById("detail-title").textContent === %q`, title))
		p.eval(`history.back()`)
		p.until("Back leaves it", `location.pathname === "/fleet/" && document.getElementById("status").textContent.startsWith("Live") && document.getElementById("detail").hidden`)
	})

	t.Run("dismiss", func(t *testing.T) {
		p := p.on(t)
		ids := eval[[]string](p, `[...document.querySelectorAll("#inbox li")].map((li) => li.dataset.id)`)
		if len(ids) != 2 {
			t.Fatalf("the inbox holds %v, want the two jobs' ends", ids)
		}
		item := func(id string) string { return fmt.Sprintf(`document.querySelector('#inbox li[data-id="%s"]')`, id) }
		// The stream's inbox event after the dismissal redraws the inbox (whether before or after
		// the page hears back from its DELETE): the button marked here is replaced then.
		p.eval(item(ids[1]) + `.querySelector("button.dismiss").dataset.before = "yes"`)
		p.eval(item(ids[0]) + `.querySelector("button.dismiss").focus()`)
		p.do("dismiss the first item", chromedp.KeyEvent(kb.Enter))
		p.until("it is gone, the keyboard on the next one", item(ids[0])+` === null && document.activeElement === `+item(ids[1])+`?.querySelector("button.dismiss")`)
		p.until("the inbox is redrawn", item(ids[1])+`?.querySelector("button.dismiss").dataset.before === undefined`)
		if !eval[bool](p, `document.activeElement === `+item(ids[1])+`.querySelector("button.dismiss")`) {
			t.Errorf("after the inbox was redrawn the keyboard is on %s", eval[string](p, `document.activeElement.outerHTML.slice(0, 120)`))
		}
		p.do("dismiss the last item", chromedp.KeyEvent(kb.Enter))
		p.until("none left, the keyboard on the inbox's heading", `document.querySelectorAll("#inbox li").length === 0 && document.activeElement.id === "inbox-title"`)
	})

	t.Run("unknown address", func(t *testing.T) {
		p := p.on(t)
		p.do("open an address that names no agent", chromedp.Navigate(s.url+"/fleet/sessions/nobody"))
		p.until("the status line says so, the address the fleet's", `document.getElementById("status").textContent.includes("It has no session nobody") && location.pathname === "/fleet/"`)
	})
}

// tab is a Chromium tab showing the Fleet page of a server.
type tab struct {
	t   *testing.T
	ctx context.Context // the browser's: no timeout; each step has its own
	s   *server
}

func openChromium(t *testing.T, s *server) *tab {
	t.Helper()
	return &tab{t: t, ctx: newTab(t), s: s}
}

// on returns the page for subtest t.
func (p *tab) on(t *testing.T) *tab {
	q := *p
	q.t = t
	return &q
}

func (p *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	c, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		p.t.Fatalf("%s: %v (the page says %q)\nserver log:\n%s", what, err, p.status(), p.s.Logs.String())
	}
}

func (p *tab) status() string {
	c, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(c, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
	return s
}

func (p *tab) eval(expr string) { p.t.Helper(); eval[any](p, expr) }

// eval returns the value of the JavaScript expression expr in the page (a promise awaited).
func eval[T any](p *tab, expr string) T {
	p.t.Helper()
	c, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil && err != chromedp.ErrJSUndefined {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits until the JavaScript expression is true, evaluating it every 50 ms, across
// navigations (a reload, a Back that loads the page again).
func (p *tab) until(what, expr string) {
	p.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		select {
		case <-deadline:
			p.t.Fatalf("%s: still not so after %s (last error: %v; the page says %q)\nserver log:\n%s", what, waitTimeout, err, p.status(), p.s.Logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fits fails the test when the page is wider than its viewport, any element ends right of it,
// or any element's content runs out of its box (into the next cell), as measured in the page.
func (p *tab) fits(width int64) {
	p.t.Helper()
	over := eval[[]string](p, overflowJS)
	if got := eval[int64](p, `innerWidth`); got != width {
		p.t.Fatalf("the viewport is %d px wide, want %d", got, width)
	}
	if len(over) > 0 {
		p.t.Errorf("at %d px, wider than the viewport:\n%s", width, strings.Join(over, "\n"))
	}
}

// busySession is the long-named session busyFleet starts.
const busySession = "fix-the-flaky-settlement-reconciliation-test-on-main-today"

// busyFleet gives ada a session with long names, running (a tool call, then silence), in a
// sandbox with a long name, a job that will be done and one that will fail; it returns the jobs.
func busyFleet(t *testing.T, s *server, ada string) (done, failed string) {
	t.Helper()
	const longBox = "integrationsandboxforthepaymentsserviceineuwest1b" // nowhere to break
	s.API(t, "POST", "/api/sandboxes", ada, mustJSON(map[string]any{"name": longBox}))
	t.Cleanup(func() { s.API(t, "DELETE", "/api/sandboxes/"+longBox, ada, "") })
	s.API(t, "POST", "/api/sessions", ada, mustJSON(map[string]any{"name": busySession, "sandbox": longBox, "agent": "command"}))
	s.API(t, "POST", "/api/sessions/"+busySession+"/turns", ada, mustJSON(map[string]any{
		"prompt": `echo '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"go test -run TestSettlementReconciliationAcrossCurrenciesAndTimezones ./internal/payments/settlement/..."}}]}}'; sleep 600`}))
	done = s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box",
		"prompt": replay(t, "codex_exec_one-command_completed.jsonl")}))["id"].(string)
	failed = s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box",
		"prompt": "echo 'the tests need a database: connection refused' >&2; exit 3"}))["id"].(string)
	return done, failed
}

// overflowJS lists what runs past the viewport: the document wider than it, any element ending
// right of it, or any element's content running out of its box (into the next cell), as
// measured in the page. fits (Chromium) and fitsFirefox run it.
const overflowJS = `(() => {
		const w = innerWidth, out = [];
		const doc = document.documentElement.scrollWidth;
		if (doc > w) out.push("the document is " + doc + " px wide");
		// What is clipped to nothing on purpose (visually hidden, for screen readers) is not seen.
		const clipped = (el) => { for (; el; el = el.parentElement) if (getComputedStyle(el).clip !== "auto") return true; return false; };
		for (const el of document.querySelectorAll("body *")) {
			if (clipped(el)) continue;
			const r = el.getBoundingClientRect();
			const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + String(el.className).trim().replace(/\s+/g, ".") : "");
			if (r.width > 0 && r.right > w + 0.5) out.push(name + " ends at " + Math.round(r.right) + " px");
			// Text running out of its own box (into the next cell), unless cut with an ellipsis.
			else if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).textOverflow !== "ellipsis" && el.clientWidth > 0)
				out.push(name + "'s content is " + el.scrollWidth + " px wide in " + el.clientWidth + " px");
		}
		return out;
	})()`

// wideLayoutJS: the agents are a table with the inbox on their right (a wide screen);
// phoneLayoutJS: the rows are cards below the inbox (a phone).
const (
	wideLayoutJS = `getComputedStyle(document.querySelector("#agents tr")).display === "table-row" &&
		document.querySelector(".inbox").getBoundingClientRect().left >= document.querySelector(".agents").getBoundingClientRect().right`
	phoneLayoutJS = `getComputedStyle(document.querySelector("#agents tr")).display === "block" &&
		document.querySelector(".inbox").getBoundingClientRect().bottom <= document.querySelector(".agents").getBoundingClientRect().top`
)

// axeJS runs axe-core (loaded in the page) and lists its serious and critical violations, one
// line each.
const axeJS = `axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations
		.filter((v) => v.impact === "serious" || v.impact === "critical")
		.map((v) => v.id + " (" + v.impact + "): " + v.help + ": " + v.nodes.slice(0, 5).map((n) => n.target.join(" ") + " " + (n.failureSummary || "").replace(/\s+/g, " ")).join("; ")))`

// axe runs axe-core (its source: axeSource) in the page and returns its serious and critical
// violations, one line each.
func (p *tab) axe(src string) []string {
	p.t.Helper()
	if !eval[bool](p, `typeof axe !== "undefined"`) {
		p.eval(src)
	}
	return eval[[]string](p, axeJS)
}

// docShot writes the page's picture to docs/img/<name>.png when HANGAR_UPDATE_DOCS=1.
func (p *tab) docShot(name string) {
	p.t.Helper()
	if os.Getenv("HANGAR_UPDATE_DOCS") != "1" {
		return
	}
	c, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100)) // 100: a PNG (less is a JPEG)
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// colorScheme emulates prefers-color-scheme: light or dark.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// axeSource returns axe-core's script, installing it with npm into .cache/axe-core on first
// use; without npm it skips t (loudly), except in CI, which has it.
func axeSource(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "axe-core"))
	if err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "node_modules", "axe-core")
	var pkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(mod, "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != axeVersion {
		npm, err := exec.LookPath("npm")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no npm here, and CI has it: the accessibility check needs it to install axe-core")
			}
			t.Skip("SKIPPING the accessibility check: no npm here to install axe-core")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, "axe-core@"+axeVersion).CombinedOutput()
		if err != nil {
			t.Fatalf("npm install axe-core@%s into %s: %v\n%s", axeVersion, dir, err, out)
		}
	}
	src, err := os.ReadFile(filepath.Join(mod, "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// linksFirefox checks in Firefox what TestFleetPageEveryScreen checks in Chromium of the
// detail of job id: opened, it is at its address; Escape gives the keyboard back to its row;
// a reload of its address opens it again, and Back leaves it.
func linksFirefox(ctx context.Context, t *testing.T, b *bidi, id string) {
	t.Helper()
	row := fmt.Sprintf(`document.querySelector('tr[data-id="%s"]')`, id)
	b.eval(ctx, "("+row+".click(), true)")
	b.until(ctx, "its detail at its address", fmt.Sprintf(`!document.getElementById("detail").hidden && location.pathname === "/fleet/jobs/%s"`, id))
	b.eval(ctx, `(document.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape"})), true)`)
	b.until(ctx, "Escape closes it, the keyboard on its row", `document.getElementById("detail").hidden && location.pathname === "/fleet/" && document.activeElement === `+row)
	b.eval(ctx, "("+row+".click(), true)")
	b.until(ctx, "its detail at its address again", fmt.Sprintf(`location.pathname === "/fleet/jobs/%s"`, id))
	b.call(ctx, "browsingContext.reload", map[string]any{"context": b.ctx, "wait": "complete"}, nil)
	b.until(ctx, "the reloaded page opens it again", fmt.Sprintf(
		`document.getElementById("status").textContent.startsWith("Live") && !document.getElementById("detail").hidden && location.pathname === "/fleet/jobs/%s"`, id))
	b.call(ctx, "browsingContext.traverseHistory", map[string]any{"context": b.ctx, "delta": -1}, nil)
	b.until(ctx, "Back leaves it", `location.pathname === "/fleet/" && document.getElementById("status").textContent.startsWith("Live") && document.getElementById("detail").hidden`)
}
