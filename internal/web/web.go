// Package web is the Fleet page: static files embedded in the binary (no build step, nothing
// loaded from outside hangar), served at /fleet. The page talks to the REST API only: a
// person's token, pasted once and kept in the browser's session storage, buys it one-time
// tickets for the fleet stream and is sent as a header (never in a URL) for the rest.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Handler serves the page under prefix (e.g. "/fleet/"); the page's own address without the
// slash redirects to it. The page's deep links, prefix+"sessions/<name>" and
// prefix+"jobs/<id>", serve the page itself, which opens that agent once signed in: the page
// is public, the data it shows needs a token.
func Handler(prefix string) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(prefix, http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The page runs only its own script and style, talks only to this server, and is
		// never framed.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if deepLink(strings.TrimPrefix(r.URL.Path, prefix)) {
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
}

// deepLink reports whether path (below the page's prefix) is the address of one agent:
// "sessions/<name>" or "jobs/<id>", one non-empty segment after the kind.
func deepLink(path string) bool {
	kind, rest, ok := strings.Cut(path, "/")
	return ok && (kind == "sessions" || kind == "jobs") && rest != "" && !strings.Contains(rest, "/")
}
