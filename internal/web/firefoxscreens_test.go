package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestFleetPageFirefoxScreens checks in headless Firefox what TestFleetPageEveryScreen and the
// cancel test check in Chromium: with a long-named running session, a done job and a failed one,
// at 1,400, 390 and 320 px wide no element is wider than the viewport (measured in the page), the
// agents are a table beside the inbox on a wide screen and cards below it on a phone; axe-core
// finds no serious or critical violation at 1,400 and 390 px in light and in dark mode (a second
// Firefox whose profile prefers dark); and a long job is cancelled from the page: the row's
// Cancel asks first, saying it cannot be undone, and No leaves it running; the detail's Cancel,
// confirmed, ends it cancelled in the row, the detail's events and the API.
func TestFleetPageFirefoxScreens(t *testing.T) {
	t.Parallel()
	exe := firefox(t)
	axe := axeSource(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitTimeout)
	defer cancel()
	s, ada := serveAda(ctx, t)

	done, failed := busyFleet(t, s, ada)

	// open signs a Firefox in and waits for the three agents' states.
	open := func(t *testing.T, b *bidi) {
		t.Helper()
		b.viewport(ctx, 1400, 900)
		b.call(ctx, "browsingContext.navigate", map[string]any{"context": b.ctx, "url": s.url + "/fleet/", "wait": "complete"}, nil)
		b.until(ctx, "the sign-in form shows", `!document.getElementById("signin").hidden`)
		b.eval(ctx, fmt.Sprintf(`(document.getElementById("token").value = %q, document.querySelector('#token-form button[type="submit"]').click(), true)`, ada))
		b.until(ctx, "live after signing in", `document.getElementById("status").textContent.startsWith("Live: ada's fleet.")`)
		row := func(id string) string { return fmt.Sprintf(`document.querySelector('#agents tr[data-id="%s"]')`, id) }
		b.until(ctx, "the session runs", fmt.Sprintf(`[...document.querySelectorAll("#agents tr")].find((tr) => tr.querySelector(".name").firstChild.textContent === %q)?.classList.contains("state-running") === true`, busySession))
		b.until(ctx, "a job is done", row(done)+`?.classList.contains("state-done") === true`)
		b.until(ctx, "a job failed", row(failed)+`?.classList.contains("state-failed") === true`)
	}
	fits := func(t *testing.T, b *bidi, width int) {
		t.Helper()
		b.viewport(ctx, width, 800)
		var over []string
		b.evalJSON(ctx, overflowJS, &over)
		if len(over) > 0 {
			t.Errorf("Firefox at %d px, wider than the viewport:\n%s", width, strings.Join(over, "\n"))
		}
	}
	axeClean := func(t *testing.T, b *bidi, scheme string) {
		t.Helper()
		if got := b.eval(ctx, `matchMedia("(prefers-color-scheme: dark)").matches`); got != fmt.Sprint(scheme == "dark") {
			t.Fatalf("Firefox's prefers-color-scheme: dark is %s in %s mode", got, scheme)
		}
		if b.eval(ctx, `typeof axe`) == "undefined" {
			b.run(ctx, axe)
		}
		for _, width := range []int{1400, 390} {
			b.viewport(ctx, width, 900)
			var v []string
			b.evalJSON(ctx, axeJS, &v)
			if len(v) > 0 {
				t.Errorf("axe-core in Firefox at %d px, %s mode: %d serious or critical violations:\n%s", width, scheme, len(v), strings.Join(v, "\n"))
			}
		}
	}

	b := startFirefox(ctx, t, exe)
	open(t, b)
	t.Run("layout", func(t *testing.T) {
		fits(t, b, 1400)
		if b.eval(ctx, wideLayoutJS) != "true" {
			t.Error("Firefox at 1,400 px: the agents are not a table with the inbox on their right")
		}
		for _, width := range []int{390, 320} {
			fits(t, b, width)
			if b.eval(ctx, phoneLayoutJS) != "true" {
				t.Errorf("Firefox at %d px: the rows are not cards below the inbox", width)
			}
		}
	})
	t.Run("axe light", func(t *testing.T) { axeClean(t, b, "light") })
	t.Run("cancel", func(t *testing.T) {
		b.viewport(ctx, 1400, 900)
		b.call(ctx, "session.subscribe", map[string]any{"events": []string{"browsingContext.userPromptOpened"}}, nil)
		id := s.API(t, "POST", "/api/jobs", ada, mustJSON(map[string]any{"agent": "command", "sandbox": "box", "prompt": "sleep 600"}))["id"].(string)
		row := fmt.Sprintf(`tr[data-id=%q]`, id)
		b.until(ctx, "the long job runs, with a Cancel", fmt.Sprintf(`document.querySelector(%q) !== null`, row+".state-running button.cancel"))
		title := b.eval(ctx, `document.getElementById("detail-title").textContent`)

		b.click(ctx, row+" button.cancel")
		if msg := b.answerDialog(ctx, false); !strings.Contains(msg, "cannot be undone") {
			t.Errorf("Firefox: the page asked %q, which does not say a cancel cannot be undone", msg)
		}
		if got := b.eval(ctx, fmt.Sprintf(`document.querySelector(%q).textContent`, row+" button.cancel")); got != "Cancel" {
			t.Errorf("Firefox: after No, the row's button reads %q, want Cancel", got)
		}
		if got := b.eval(ctx, `document.getElementById("detail-title").textContent`); got != title {
			t.Errorf("Firefox: the row's Cancel opened the detail: %q", got)
		}
		if st := s.API(t, "GET", "/api/jobs/"+id, ada, "")["state"]; st != "running" {
			t.Errorf("after No in Firefox, the job is %v, want running", st)
		}

		b.click(ctx, row+" td.name")
		b.click(ctx, "#detail-cancel button.cancel")
		b.answerDialog(ctx, true)
		b.until(ctx, "the job ends cancelled", fmt.Sprintf(`document.querySelector(%q) !== null && document.querySelector("#detail-cancel button") === null && `, row+".state-cancelled")+
			`[...document.querySelectorAll("#events .line-turn")].some((l) => l.textContent.startsWith("── turn cancelled"))`)
		if st := s.API(t, "GET", "/api/jobs/"+id, ada, "")["state"]; st != "cancelled" {
			t.Errorf("after cancelling in Firefox, the job is %v, want cancelled", st)
		}
	})

	// layout.css.prefers-color-scheme.content-override 0: pages see prefers-color-scheme: dark.
	dark := startFirefoxWith(ctx, t, exe, `user_pref("layout.css.prefers-color-scheme.content-override", 0);`+"\n")
	open(t, dark)
	t.Run("axe dark", func(t *testing.T) { axeClean(t, dark, "dark") })
}
