// Package e2bapi is hangar as E2B's API: E2B's own SDKs, unchanged, make and use hangar's
// sandboxes (Docker, Kubernetes, E2B, local) with E2B_API_URL=<hangar>/e2b,
// E2B_SANDBOX_URL=<hangar>/e2b/sandbox and E2B_API_KEY=<a hangar token>.
//
// It is a transport, like internal/rest, mounted at /e2b on the same listener: the REST control
// API (create, connect, list, info, kill, timeout, pause; api*.go) over the sandbox manager, whose
// sandboxes these are (the same rows, visible in `hangar sandbox ls` and the Fleet, E2B's sandbox
// id being hangar's name), and the daemons behind one URL (/e2b/sandbox, daemon*.go), reached
// with the envdAccessToken the API hands out (grants.go). Templates map E2B template ids to a
// provider and an image (templates.go, HANGAR_E2B_TEMPLATES). Timeouts are the sandbox domain's
// deadlines (sandbox.Manager.RunDeadlines), kept in the store. Errors are E2B's shape,
// {"code": <status>, "message": "a sentence"}, with the statuses that make the SDK raise its own
// error types. docs/e2b.md is its page.
package e2bapi
