package web_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// browser is the package's one headless Chromium, started by the first test that asks for a
// tab (newTab) and closed by TestMain once every test has run: a Chromium costs about a
// CPU-second to start, and each test gets a browser context of its own (cookies, storage,
// cache apart), as a fresh browser would give it. once guards the rest.
var browser struct {
	once   sync.Once
	ctx    context.Context // its first tab's; a child from NewContext is a new tab of the same browser
	cancel context.CancelFunc
	err    error
}

// chromium finds Debian's chromium, or skips (loudly) where there is none; CI installs it.
func chromium(t *testing.T) string {
	return findBrowser(t, "chromium", "browser tests", "chromium", "chromium-browser", "google-chrome")
}

// findBrowser returns the path of the first of names found, or skips t (loudly) where there is
// none — fails it under CI=true, where the Debian package pkg is always installed; tests says
// which of the Fleet page's tests need it.
func findBrowser(t *testing.T, pkg, tests string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no %s here, and CI always installs it (apt-get install %s)", names[0], pkg)
	}
	t.Skipf("SKIPPING: no %s here; apt-get install %s to run the Fleet page's %s", names[0], pkg, tests)
	return ""
}

// newTab returns a tab of the package's Chromium (started on first use) in a browser context
// of t's own, closed with it when t ends. The tab's context has no timeout: each step takes
// its own.
func newTab(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	browser.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		browser.ctx = bctx
		browser.cancel = func() { bcancel(); acancel() }
		// The first run starts the browser, which lives as long as that run's context: bctx,
		// which only closeBrowser cancels.
		browser.err = chromedp.Do(bctx)
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a chromium tab: %v", err)
	}
	return ctx
}

// closeBrowser stops the package's Chromium, if a test started it, and waits until it has
// exited.
func closeBrowser() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

// closingBrowser runs the tests, then closes the browser they shared (before TestMain looks
// for leaked goroutines).
type closingBrowser struct{ m *testing.M }

func (c closingBrowser) Run() int {
	defer closeBrowser()
	return c.m.Run()
}
