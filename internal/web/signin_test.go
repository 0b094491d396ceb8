package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestFleetPageSignInLinkStuckAndRefusedCancel drives the page in headless Chromium against a
// hangar whose agents are stuck after 2 s of silence (--stuck-after):
//   - hangar fleet --web's link (a sign-in ticket in the address's fragment) signs the page in
//     with no token pasted, and leaves the address at once; the same link again shows hangar's
//     sentence on the sign-in form;
//   - a session silent past 2 s reads stuck in its row and in the inbox (docs/img/fleet-stuck.png),
//     whose item opens it;
//   - a cancel that hangar refuses (the session was deleted meanwhile) says hangar's sentence
//     in the status line and the panel, and the row keeps its Cancel.
func TestFleetPageSignInLinkStuckAndRefusedCancel(t *testing.T) {
	t.Parallel()
	chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	s, ada := serveAda(ctx, t, "--stuck-after", "2s")
	p := openChromium(t, s)

	ticket := s.API(t, "POST", "/api/fleet/sign-in-tickets", ada, "")["ticket"].(string)
	p.do("open the sign-in link", chromedp.EmulateViewport(1400, 900), chromedp.Navigate(s.url+"/fleet/#ticket="+ticket))
	p.until("live, signed in by the link", `document.getElementById("status").textContent.startsWith("Live: ada's fleet.")`)
	if got := eval[string](p, `location.href`); got != s.url+"/fleet/" {
		t.Errorf("the address after signing in is %q, want %s/fleet/ (no ticket)", got, s.url)
	}
	if tok := eval[string](p, `sessionStorage.getItem("hangar-token") || ""`); tok == "" || tok == ada {
		t.Errorf("the page keeps %q; want a token of its own, not ada's", tok)
	}

	// A session that calls a tool, then is silent: stuck 2 s on.
	s.API(t, "POST", "/api/sessions", ada, mustJSON(map[string]any{"name": "fix-tests", "sandbox": "box", "agent": "command"}))
	s.API(t, "POST", "/api/sessions/fix-tests/turns", ada, mustJSON(map[string]any{
		"prompt": "# Fix the flaky settlement test\n" + `echo '{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"go test ./..."}}]}}'; sleep 600`}))
	row := `[...document.querySelectorAll("#agents tr")].find((tr) => tr.querySelector(".name").firstChild.textContent === "fix-tests")`
	p.until("the session reads stuck", row+`?.classList.contains("state-stuck") === true`)
	p.until("the inbox says it looks stuck", `[...document.querySelectorAll("#inbox li")].some((li) => li.textContent.includes("fix-tests looks stuck: nothing from it for over 2 s"))`)
	p.docShot("fleet-stuck")

	// The page stops hearing from hangar (its stream closed), the session's turn is cancelled
	// and the session deleted behind its back: its Cancel is refused, in hangar's words.
	asked, answers := dialogs(t, p.ctx)
	p.eval(`(fleet.es.close(), fleet.es = null, true)`)
	turn := s.API(t, "GET", "/api/fleet", ada, "")["agents"].([]any)[0].(map[string]any)["turn"].(map[string]any)["id"].(string)
	s.API(t, "POST", "/api/sessions/fix-tests/turns/"+turn+"/cancel", ada, "")
	for deadline := time.After(waitTimeout); s.API(t, "GET", "/api/sessions/fix-tests", ada, "")["state"] != "cancelled"; {
		select {
		case <-deadline:
			t.Fatal("the session's turn is not cancelled after " + waitTimeout.String())
		case <-time.After(50 * time.Millisecond): // a poll, as until's
		}
	}
	s.API(t, "DELETE", "/api/sessions/fix-tests", ada, "")
	answers <- true
	p.do("open the session from its inbox item", chromedp.Click(chromedp.CSS(`#inbox li.inbox-stuck button.open-agent`)))
	p.until("its panel opens, at its address", `!document.getElementById("detail").hidden && location.pathname === "/fleet/sessions/fix-tests"`)
	p.do("cancel it from its panel", chromedp.Click(chromedp.CSS("#detail-cancel button.cancel")))
	asked()
	p.until("the status line says why not", `document.getElementById("status").textContent.startsWith("Not cancelled: ")`)
	said := eval[string](p, `document.getElementById("status").textContent`)
	if !strings.Contains(said, "session") || eval[string](p, `document.getElementById("detail-error").textContent`) != said {
		t.Errorf("the refusal reads %q in the status line and %q in the panel; want hangar's sentence about the session in both",
			said, eval[string](p, `document.getElementById("detail-error").textContent`))
	}
	if got := eval[string](p, row+`.querySelector("button.cancel")?.textContent ?? ""`); got != "Cancel" {
		t.Errorf("after the refusal the row's button reads %q, want Cancel", got)
	}

	p.do("the same link again, in a new page", chromedp.Navigate("about:blank"), chromedp.Navigate(s.url+"/fleet/#ticket="+ticket))
	p.until("the sign-in form says the link is used", `!document.getElementById("signin").hidden && document.getElementById("signin-error").textContent.includes("hangar fleet --web")`)
	if got := eval[string](p, `location.href`); got != s.url+"/fleet/" {
		t.Errorf("the address after a used link is %q, want %s/fleet/", got, s.url)
	}
}
