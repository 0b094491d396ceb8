package rest_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/doctest"
	"github.com/hangar-dev/hangar/internal/store"
)

// The isolation matrix: every REST route and MCP tool, called by every kind of caller, with
// the outcome each must get. docs/security.md publishes this same table (TestSecurityDocTable
// fails when they differ; HANGAR_UPDATE_DOCS=1 rewrites the page's table from this one).
//
// To add a route or a tool, add one line to matrix. The placeholders in its path, body or
// arguments are made for each cell (see placeholders), so a row says only what it calls.

// callers are the matrix's columns, in order. The target of every row belongs to ada (the
// owner); bob is another user.
var callers = []struct{ name, doc string }{
	{"owner", "ada's token (scopes user, mcp)"},
	{"other user", "bob's token (user, mcp)"},
	{"bound, own", "ada's token bound to the sandbox the row acts on (user, mcp)"},
	{"bound, other's", "bob's token bound to ada's sandbox (user, mcp): the API refuses to make it (the first token rows), so the test writes it into the store to prove every request checks the owner"},
	{"mcp only", "ada's token with only the mcp scope"},
	{"jobs only", "ada's token with only the jobs scope"},
	{"revoked", "ada's revoked token (user, mcp)"},
	{"expired", "ada's expired token (user, mcp)"},
	{"admin", "the first admin token"},
}

const (
	ownerCol = iota
	otherCol
	boundOwnCol
	boundOtherCol
	mcpOnlyCol
	jobsOnlyCol
	revokedCol
	expiredCol
	adminCol
	nCallers
)

// action is what a row calls: a REST route (method and path) or an MCP tool, with a body or
// arguments. listed, for a list, is the placeholder whose id the list must hold: a list
// without it is the outcome "200, hidden" (REST) or "ok, hidden" (MCP).
type action struct {
	tool         string // MCP tool; "" for REST
	resource     string // MCP resource operation: read, subscribe or list; "" for none
	method, path string
	body         string // for a resource operation, its URI
	listed       string
	// access, for a call to a sandbox's daemon through /e2b/sandbox (E2B_SANDBOX_URL), is the
	// X-Access-Token the caller sends: "grant", an envdAccessToken for the caller's token and
	// the sandbox that verifies (what the E2B API's connect answers, minted here for every
	// caller, so that each check behind the signature is what refuses); "token", the caller's
	// hangar token itself.
	access string
}

func route(methodPath, body string) action {
	m, p, _ := strings.Cut(methodPath, " ")
	return action{method: m, path: p, body: body}
}

func restList(methodPath, listed string) action {
	a := route(methodPath, "")
	a.listed = listed
	return a
}

func tool(name, args string) action { return action{tool: name, body: args} }

// daemonCall is a call to {sb}'s daemon through /e2b/sandbox, as E2B's SDK makes it: the sandbox
// in E2b-Sandbox-Id, access as action.access says.
func daemonCall(methodPath, body, access string) action {
	a := route(methodPath, body)
	a.access = access
	return a
}

// resource is an MCP resource operation (read or subscribe) on uri.
func resource(op, uri string) action { return action{resource: op, body: uri} }

func toolList(name, args, listed string) action {
	a := tool(name, args)
	a.listed = listed
	return a
}

// row is one line of the matrix: its name in docs/security.md, what it calls and what each
// caller (in callers' order) must get.
type row struct {
	name string
	do   action
	want [nCallers]string
}

func want(outcomes ...string) [nCallers]string {
	var w [nCallers]string
	if copy(w[:], outcomes) != nCallers {
		panic(fmt.Sprintf("a matrix row needs %d outcomes, has %d", nCallers, len(outcomes)))
	}
	return w
}

// matrix: REST outcomes are HTTP statuses; MCP ones are ok, 401 or 403 (refused before any
// JSON-RPC: no valid token, or one without the mcp scope) or "not found" (a tool error saying there is no such sandbox, process, terminal, session,
// turn or job, or none this token may use; for a resource, the JSON-RPC "Resource not found").
var matrix = []row{
	{"GET /api/whoami", route("GET /api/whoami", ""), want("200", "200", "200", "200", "200", "200", "401", "401", "200")},
	{"POST /api/tokens", route("POST /api/tokens", `{"scopes": ["mcp"]}`), want("201", "201", "201", "404", "403", "403", "401", "401", "201")},
	{"POST /api/tokens, sandbox {sb}", route("POST /api/tokens", `{"scopes": ["user", "mcp"], "sandbox": "{sb}"}`), want("201", "404", "201", "404", "403", "403", "401", "401", "201")},
	{"POST /api/tokens, sandbox {later}", route("POST /api/tokens", `{"scopes": ["mcp"], "sandbox": "{later}"}`), want("404", "404", "403", "403", "403", "403", "401", "401", "404")},
	{"GET /api/tokens", restList("GET /api/tokens", "{tok}"), want("200", "200, hidden", "200", "200, hidden", "403", "403", "401", "401", "200")},
	{"DELETE /api/tokens/{tok}", route("DELETE /api/tokens/{tok}", ""), want("204", "404", "204", "404", "403", "403", "401", "401", "204")},
	{"POST /api/sandboxes", route("POST /api/sandboxes", `{"name": "{new}", "daemon": false}`), want("201", "201", "403", "403", "403", "403", "401", "401", "201")},
	{"GET /api/sandboxes", restList("GET /api/sandboxes", "{sb}"), want("200", "200, hidden", "200", "200, hidden", "403", "403", "401", "401", "200")},
	{"GET /api/sandboxes/{sb}", route("GET /api/sandboxes/{sb}", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"DELETE /api/sandboxes/{fresh}", route("DELETE /api/sandboxes/{fresh}", ""), want("204", "404", "403", "404", "403", "403", "401", "401", "204")},
	{"POST /api/sandboxes/{fresh}/pause", route("POST /api/sandboxes/{fresh}/pause", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sandboxes/{paused}/resume", route("POST /api/sandboxes/{paused}/resume", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sandboxes/{sb}/exec", route("POST /api/sandboxes/{sb}/exec", `{"command": "true"}`), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sandboxes/{sb}/exec/stream", route("POST /api/sandboxes/{sb}/exec/stream", `{"command": "true"}`), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sandboxes/{sb}/processes", route("POST /api/sandboxes/{sb}/processes", `{"command": "true"}`), want("201", "404", "201", "404", "403", "403", "401", "401", "201")},
	{"GET /api/sandboxes/{sb}/processes", restList("GET /api/sandboxes/{sb}/processes", "{proc}"), want("200", "404", "200, hidden", "404", "403", "403", "401", "401", "200")},
	{"GET /api/sandboxes/{sb}/processes/{proc}", route("GET /api/sandboxes/{sb}/processes/{proc}", ""), want("200", "404", "404", "404", "403", "403", "401", "401", "200")},
	{"GET /api/sandboxes/{sb}/processes/{proc}/stream", route("GET /api/sandboxes/{sb}/processes/{proc}/stream", ""), want("200", "404", "404", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sandboxes/{sb}/processes/{proc}/input", route("POST /api/sandboxes/{sb}/processes/{proc}/input", `{"input": "x\n"}`), want("204", "404", "404", "404", "403", "403", "401", "401", "204")},
	{"POST /api/sandboxes/{sb}/processes/{term}/resize", route("POST /api/sandboxes/{sb}/processes/{term}/resize", `{"cols": 100, "rows": 30}`), want("204", "404", "404", "404", "403", "403", "401", "401", "204")},
	{"DELETE /api/sandboxes/{sb}/processes/{fproc}", route("DELETE /api/sandboxes/{sb}/processes/{fproc}", ""), want("202", "404", "404", "404", "403", "403", "401", "401", "202")},
	{"GET /api/sandboxes/{sb}/watch", route("GET /api/sandboxes/{sb}/watch?path=.", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"GET /api/fleet", restList("GET /api/fleet", "{ses}"), want("200", "200, hidden", "403", "403", "403", "403", "401", "401", "200, hidden")},
	{"GET /api/fleet?user=ada", restList("GET /api/fleet?user=ada", "{ses}"), want("200", "403", "403", "403", "403", "403", "401", "401", "200")},
	{"GET /api/fleet/stream?user=ada", route("GET /api/fleet/stream?user=ada", ""), want("200", "403", "403", "403", "403", "403", "401", "401", "200")},
	{"POST /api/fleet/tickets", route("POST /api/fleet/tickets", ""), want("201", "201", "403", "403", "403", "403", "401", "401", "201")},
	{"POST /api/fleet/sign-in-tickets", route("POST /api/fleet/sign-in-tickets", ""), want("201", "201", "403", "403", "403", "403", "401", "401", "201")},
	{"POST /api/fleet/sign-in {signin}", route("POST /api/fleet/sign-in", `{"ticket": "{signin}"}`), want("201", "201", "201", "201", "201", "201", "201", "201", "201")},
	{"DELETE /api/fleet/inbox/{item}", route("DELETE /api/fleet/inbox/{item}", ""), want("204", "404", "403", "403", "403", "403", "401", "401", "404")},
	{"POST /api/sessions", route("POST /api/sessions", `{"name": "{new}", "sandbox": "{sb}", "agent": "command"}`), want("201", "404", "201", "404", "403", "403", "401", "401", "201")},
	{"GET /api/sessions", restList("GET /api/sessions", "{ses}"), want("200", "200, hidden", "200", "200, hidden", "403", "403", "401", "401", "200")},
	{"GET /api/sessions/{ses}", route("GET /api/sessions/{ses}", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"DELETE /api/sessions/{fses}", route("DELETE /api/sessions/{fses}", ""), want("204", "404", "204", "404", "403", "403", "401", "401", "204")},
	{"POST /api/sessions/{fses}/turns", route("POST /api/sessions/{fses}/turns", `{"prompt": "true"}`), want("202", "404", "202", "404", "403", "403", "401", "401", "202")},
	{"GET /api/sessions/{ses}/turns", restList("GET /api/sessions/{ses}/turns", "{turn}"), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"GET /api/sessions/{ses}/turns/{turn}", route("GET /api/sessions/{ses}/turns/{turn}", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/sessions/{ses}/turns/{turn}/cancel", route("POST /api/sessions/{ses}/turns/{turn}/cancel", ""), want("202", "404", "202", "404", "403", "403", "401", "401", "202")},
	{"GET /api/sessions/{ses}/events", route("GET /api/sessions/{ses}/events", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"GET /api/sessions/{ses}/events/stream", route("GET /api/sessions/{ses}/events/stream", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /api/jobs", route("POST /api/jobs", `{"prompt": "true", "agent": "command", "sandbox": "{sb}"}`), want("201", "404", "201", "404", "403", "201", "401", "401", "201")},
	{"GET /api/jobs", restList("GET /api/jobs", "{job}"), want("200", "200, hidden", "200", "200, hidden", "403", "200", "401", "401", "200")},
	{"GET /api/jobs/{job}", route("GET /api/jobs/{job}", ""), want("200", "404", "200", "404", "403", "200", "401", "401", "200")},
	{"POST /api/jobs/{job}/cancel", route("POST /api/jobs/{job}/cancel", ""), want("202", "404", "202", "404", "403", "202", "401", "401", "202")},
	{"GET /api/jobs/{job}/events", route("GET /api/jobs/{job}/events", ""), want("200", "404", "200", "404", "403", "200", "401", "401", "200")},
	{"GET /api/jobs/{job}/events/stream", route("GET /api/jobs/{job}/events/stream", ""), want("200", "404", "200", "404", "403", "200", "401", "401", "200")},
	{"GET /api/oauth/grants", restList("GET /api/oauth/grants", "{grant}"), want("200", "200, hidden", "200", "200, hidden", "403", "403", "401", "401", "200")},
	{"DELETE /api/oauth/grants/{fgrant}", route("DELETE /api/oauth/grants/{fgrant}", ""), want("204", "404", "204", "404", "403", "403", "401", "401", "204")},
	// hangar's E2B API (/e2b, internal/e2bapi): its API key is the same token (X-API-Key, or a
	// bearer token as here); E2B's sandbox ids are hangar's names; another's sandbox is not
	// found, as E2B answers.
	{"POST /e2b/v2/sandboxes", route("POST /e2b/v2/sandboxes", `{"templateID": "base", "timeout": 300}`), want("201", "201", "403", "403", "403", "403", "401", "401", "201")},
	{"GET /e2b/v2/sandboxes", restList("GET /e2b/v2/sandboxes", "{sb}"), want("200", "200, hidden", "200", "200, hidden", "403", "403", "401", "401", "200")},
	{"GET /e2b/sandboxes/{sb}", route("GET /e2b/sandboxes/{sb}", ""), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /e2b/v2/sandboxes/{sb}/connect", route("POST /e2b/v2/sandboxes/{sb}/connect", `{"timeout": 60}`), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /e2b/v2/sandboxes/{paused}/connect", route("POST /e2b/v2/sandboxes/{paused}/connect", `{"timeout": 60}`), want("200", "404", "200", "404", "403", "403", "401", "401", "200")},
	{"POST /e2b/sandboxes/{fresh}/timeout", route("POST /e2b/sandboxes/{fresh}/timeout", `{"timeout": 600}`), want("204", "404", "403", "404", "403", "403", "401", "401", "204")},
	{"POST /e2b/sandboxes/{fresh}/pause", route("POST /e2b/sandboxes/{fresh}/pause", ""), want("204", "404", "204", "404", "403", "403", "401", "401", "204")},
	{"DELETE /e2b/sandboxes/{fresh}", route("DELETE /e2b/sandboxes/{fresh}", ""), want("204", "404", "403", "404", "403", "403", "401", "401", "204")},
	{"GET /e2b/sandboxes/{sb}/metrics", route("GET /e2b/sandboxes/{sb}/metrics", ""), want("501", "404", "501", "404", "403", "403", "401", "401", "501")},
	{"POST /e2b/sandboxes/{sb}/snapshots", route("POST /e2b/sandboxes/{sb}/snapshots", ""), want("501", "501", "501", "501", "403", "403", "401", "401", "501")},
	// The daemon pass-through (/e2b/sandbox, E2B_SANDBOX_URL) takes no API key: the access token
	// is an envdAccessToken, good for one token and one sandbox. One that verifies is still
	// refused when its token may no longer act (401) or no longer reach the sandbox (502, as
	// E2B's edge answers for a sandbox it does not run); a hangar token is no access token.
	{"POST /e2b/sandbox/…/ListDir, {sb}, the caller's envdAccessToken", daemonCall("POST /e2b/sandbox/filesystem.Filesystem/ListDir", `{"path": "."}`, "grant"), want("200", "502", "200", "502", "401", "401", "401", "401", "200")},
	{"GET /e2b/sandbox/files, {sb}, the caller's envdAccessToken", daemonCall("GET /e2b/sandbox/files?path=.hangar-isolation", "", "grant"), want("404", "502", "404", "502", "401", "401", "401", "401", "404")},
	{"POST /e2b/sandbox/…/ListDir, {sb}, the caller's hangar token", daemonCall("POST /e2b/sandbox/filesystem.Filesystem/ListDir", `{"path": "."}`, "token"), want("401", "401", "401", "401", "401", "401", "401", "401", "401")},
	// The OAuth endpoints take no bearer token: each caller's gets the same answer as none.
	{"GET /.well-known/oauth-protected-resource/mcp", route("GET /.well-known/oauth-protected-resource/mcp", ""), want("200", "200", "200", "200", "200", "200", "200", "200", "200")},
	{"GET /.well-known/oauth-authorization-server", route("GET /.well-known/oauth-authorization-server", ""), want("200", "200", "200", "200", "200", "200", "200", "200", "200")},
	{"POST /oauth/register", route("POST /oauth/register", `{"redirect_uris": ["https://app.example/cb"]}`), want("201", "201", "201", "201", "201", "201", "201", "201", "201")},
	{"GET /oauth/authorize, no client", route("GET /oauth/authorize", ""), want("400", "400", "400", "400", "400", "400", "400", "400", "400")},
	{"POST /oauth/authorize, not from the page", route("POST /oauth/authorize", ""), want("403", "403", "403", "403", "403", "403", "403", "403", "403")},
	{"POST /oauth/token, no client", route("POST /oauth/token", ""), want("401", "401", "401", "401", "401", "401", "401", "401", "401")},
	{"POST /oauth/revoke, no client", route("POST /oauth/revoke", ""), want("401", "401", "401", "401", "401", "401", "401", "401", "401")},
	{"MCP exec", tool("exec", `{"sandbox": "{sb}", "command": "true"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP exec, streamed", tool("exec", `{"sandbox": "{sb}", "command": "true", "stream": true}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP process start", tool("process", `{"action": "start", "sandbox": "{sb}", "command": "true"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP process list", toolList("process", `{"action": "list", "sandbox": "{sb}"}`, "{proc}"), want("ok", "not found", "ok, hidden", "not found", "ok, hidden", "403", "401", "401", "ok")},
	{"MCP process attach {proc}", tool("process", `{"action": "attach", "sandbox": "{sb}", "process_id": "{proc}"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP process input {proc}", tool("process", `{"action": "input", "sandbox": "{sb}", "process_id": "{proc}", "input": "x\n"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP process kill {fproc}", tool("process", `{"action": "kill", "sandbox": "{sb}", "process_id": "{fproc}"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP terminal_open", tool("terminal_open", `{"sandbox": "{sb}", "command": "cat"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP terminal_write {term}", tool("terminal_write", `{"sandbox": "{sb}", "terminal_id": "{term}", "input": "x"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP terminal_read {term}", tool("terminal_read", `{"sandbox": "{sb}", "terminal_id": "{term}"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP terminal_resize {term}", tool("terminal_resize", `{"sandbox": "{sb}", "terminal_id": "{term}", "cols": 80, "rows": 24}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP terminal_close {fterm}", tool("terminal_close", `{"sandbox": "{sb}", "terminal_id": "{fterm}"}`), want("ok", "not found", "not found", "not found", "not found", "403", "401", "401", "ok")},
	{"MCP session create", tool("session", `{"action": "create", "name": "{new}", "sandbox": "{sb}", "agent": "command"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP session list", toolList("session", `{"action": "list"}`, "{ses}"), want("ok", "ok, hidden", "ok", "ok, hidden", "ok", "403", "401", "401", "ok")},
	{"MCP session get {ses}", tool("session", `{"action": "get", "session": "{ses}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP session events {ses}", tool("session", `{"action": "events", "session": "{ses}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP turn start {fses}", tool("turn", `{"action": "start", "session": "{fses}", "prompt": "true"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP turn list {ses}", toolList("turn", `{"action": "list", "session": "{ses}"}`, "{turn}"), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP turn get {turn}", tool("turn", `{"action": "get", "session": "{ses}", "turn_id": "{turn}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP turn cancel {turn}", tool("turn", `{"action": "cancel", "session": "{ses}", "turn_id": "{turn}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP job start", tool("job", `{"action": "start", "prompt": "true", "agent": "command", "sandbox": "{sb}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP job list", toolList("job", `{"action": "list"}`, "{job}"), want("ok", "ok, hidden", "ok", "ok, hidden", "ok", "403", "401", "401", "ok")},
	{"MCP job get {job}", tool("job", `{"action": "get", "job_id": "{job}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP job cancel {job}", tool("job", `{"action": "cancel", "job_id": "{job}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP job events {job}", tool("job", `{"action": "events", "job_id": "{job}"}`), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP resources/list", action{resource: "list", listed: "{ses}"}, want("ok", "ok, hidden", "ok", "ok, hidden", "ok", "403", "401", "401", "ok")},
	{"MCP resources/list, jobs", action{resource: "list", listed: "{job}"}, want("ok", "ok, hidden", "ok", "ok, hidden", "ok", "403", "401", "401", "ok")},
	{"MCP read hangar://sessions/{ses}/events", resource("read", "hangar://sessions/{ses}/events?since=1"), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP subscribe hangar://sessions/{ses}/events", resource("subscribe", "hangar://sessions/{ses}/events"), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP read hangar://sandboxes/{sb}/watch", resource("read", "hangar://sandboxes/{sb}/watch?path=."), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP subscribe hangar://sandboxes/{sb}/watch", resource("subscribe", "hangar://sandboxes/{sb}/watch?path=."), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP read hangar://jobs/{job}/events", resource("read", "hangar://jobs/{job}/events"), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
	{"MCP subscribe hangar://jobs/{job}/events", resource("subscribe", "hangar://jobs/{job}/events"), want("ok", "not found", "ok", "not found", "ok", "403", "401", "401", "ok")},
}

// placeholders are what a row's {name}s stand for. The ones "made for the row, unused" are
// made anew after each cell that succeeded, so that one caller's success (a delete, a kill)
// does not change what the next caller meets; a refused call changes nothing, so the cell after
// it meets the same one.
var placeholders = []struct{ name, doc string }{
	{"{sb}", "ada's running sandbox (with a daemon)"},
	{"{fresh}", "a sandbox of ada's made for the row, unused; the bound columns' tokens are bound to it"},
	{"{paused}", "a paused sandbox of ada's made for the row, unused; the bound columns' tokens are bound to it"},
	{"{new}", "a name no sandbox has"},
	{"{later}", "a name no sandbox has yet: a token cannot be bound to it in advance"},
	{"{tok}", "a token of ada's bound to {sb}, made for the row, unused"},
	{"{proc}", "a background process ada's owner token started in {sb}"},
	{"{fproc}", "a background process of the owner token's, started for the row, unused"},
	{"{term}", "a terminal the owner token opened in {sb} over MCP"},
	{"{fterm}", "a terminal of the owner token's, opened for the row, unused"},
	{"{ses}", "ada's session in {sb}, with one turn that has ended"},
	{"{turn}", "that turn"},
	{"{fses}", "a session of ada's in {sb}, made for the row, unused"},
	{"{job}", "a job ada's jobs token started in {sb}"},
	{"{item}", "an item in ada's inbox made for the row, unused: a process of the owner token's that exited non-zero"},
	{"{signin}", "a sign-in ticket ada's owner token asked for, made for the row, unused: the ticket is the credential and signs a page in as ada whoever sends it, with whatever token (TestFleetSignIn: replay, a stream ticket, a revoked maker; expiry in fleet's TestSignInTickets)"},
	{"{grant}", "an OAuth grant of ada's, bound to {sb}"},
	{"{fgrant}", "an OAuth grant of ada's, bound to {sb}, made for the row, unused"},
}

// mcpEras are the protocol revisions every MCP row is called over: each must give the row's
// outcome.
var mcpEras = []string{"2025-11-25", "2026-07-28"}

const isolationTimeout = 30 * time.Second

// world is the matrix's fixtures: ada's sandbox, a process and a terminal in it, and a token
// per column.
type world struct {
	top     *testing.T // the test the world lives as long as
	e       *env
	tokens  [nCallers]string
	proc    string
	term    string
	n       int                                   // names made so far
	bound   map[string][2]string                  // per fresh sandbox: the bound-own and bound-other tokens
	clients map[string]map[int]*mcp.ClientSession // per era and column
	refused [nCallers]string                      // per column: the status /mcp refused its token with
	grant   string                                // {grant}, made on first use
	spares  map[string]spare                      // per placeholder: what the next cell of the row meets
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := newEnv(t, func(e *env) {
		e.withMCP, e.withOAuth, e.maxStreams, e.maxProcs, e.maxWatches = true, true, 64, 64, 64
		e.fleetPoll = time.Second // the matrix follows no fleet: its stream's cell needs only the answer
	})
	w := &world{top: t, e: e, bound: map[string][2]string{}, spares: map[string]spare{}, clients: map[string]map[int]*mcp.ClientSession{}}
	_, w.tokens[ownerCol] = e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	_, w.tokens[otherCol] = e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, w.tokens[ownerCol], "ada-box", "")
	_, w.tokens[boundOwnCol] = e.newToken(t, w.tokens[ownerCol], `{"scopes": ["user", "mcp"], "sandbox": "ada-box"}`)
	w.tokens[boundOtherCol] = w.inject(t, "bob", "ada-box", time.Time{})
	_, w.tokens[mcpOnlyCol] = e.newToken(t, e.admin, `{"user": "ada", "scopes": ["mcp"]}`)
	_, w.tokens[jobsOnlyCol] = e.newToken(t, e.admin, `{"user": "ada", "scopes": ["jobs"]}`)
	revokedID, revoked := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	if r := e.do(t, "DELETE", "/api/tokens/"+revokedID, e.admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", r.status, r.raw)
	}
	w.tokens[revokedCol] = revoked
	w.tokens[expiredCol] = w.inject(t, "ada", "", time.Now().Add(-time.Hour))
	w.tokens[adminCol] = e.admin
	w.proc = e.startProcess(t, w.tokens[ownerCol], "ada-box", "cat")
	w.term = w.openTerminal(t, mcpEras[0])
	return w
}

// inject writes a token straight into the store, past CreateToken's rules, and returns its
// secret: the store keeps only the hex SHA-256 of a secret.
func (w *world) inject(t *testing.T, user, sandbox string, expires time.Time) string {
	t.Helper()
	secret := "hgr_" + rand.Text()
	sum := sha256.Sum256([]byte(secret))
	w.n++
	tok := store.Token{ID: "tok_injected" + strconv.Itoa(w.n), User: user, Hash: hex.EncodeToString(sum[:]), Hint: "hgr_",
		Scopes: []string{"user", "mcp"}, Sandbox: sandbox, CreatedAt: time.Now().Add(-2 * time.Hour), ExpiresAt: expires}
	if _, err := w.e.store.EnsureUser(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	if err := w.e.store.CreateToken(context.Background(), tok); err != nil {
		t.Fatalf("inject token: %v", err)
	}
	return secret
}

func (w *world) name(prefix string) string {
	w.n++
	return prefix + "-" + strconv.Itoa(w.n)
}

// cell is one call of the matrix, with its own placeholders.
type cell struct {
	w       *world
	col     int
	era     string // MCP rows only
	vars    map[string]string
	sandbox string // the sandbox the row acts on, for the bound columns' tokens
}

// spare is a fresh placeholder a refused cell left as it was, for the next cell of the row.
type spare struct {
	value   string
	cleanup func(t *testing.T) // nil: nothing to undo
}

// prepare makes the placeholders a row uses. A fresh one (a process to kill, a sandbox to
// delete) is made anew only after a cell that succeeded: a refused call changes nothing, so the
// next cell meets the same one (see keep).
func (w *world) prepare(t *testing.T, r row, col int, era string) *cell {
	t.Helper()
	c := &cell{w: w, col: col, era: era, vars: map[string]string{"{sb}": "ada-box", "{proc}": w.proc, "{term}": w.term}, sandbox: "ada-box"}
	text := r.do.path + r.do.body + r.do.listed
	for _, ph := range placeholders {
		if _, made := c.vars[ph.name]; made || !strings.Contains(text, ph.name) {
			continue
		}
		if sp, ok := w.spares[ph.name]; ok {
			c.vars[ph.name] = sp.value
		} else {
			c.vars[ph.name] = w.fresh(t, ph.name, era)
		}
	}
	c.sandbox = cmp.Or(c.vars["{fresh}"], c.vars["{paused}"], c.sandbox)
	return c
}

// fresh makes the placeholder name stands for, and records it as a spare with what undoes it.
func (w *world) fresh(t *testing.T, name, era string) string {
	t.Helper()
	owner := w.tokens[ownerCol]
	sp := spare{}
	switch name {
	case "{fresh}", "{paused}":
		sp.value = w.name("cell")
		w.e.sandbox(t, owner, sp.value, `, "daemon": false`)
		if name == "{paused}" {
			if got := w.do(t, "POST", "/api/sandboxes/"+sp.value+"/pause", owner, ""); got != "200" {
				t.Fatalf("pause %s = %s", sp.value, got)
			}
		}
	case "{new}", "{later}":
		sp.value = w.name("new")
	case "{tok}":
		sp.value, _ = w.e.newToken(t, w.e.admin, `{"user": "ada", "scopes": ["mcp"], "sandbox": "ada-box"}`)
	case "{fproc}", "{fterm}":
		if name == "{fproc}" {
			sp.value = w.e.startProcess(t, owner, "ada-box", "sleep 300")
		} else {
			sp.value = w.openTerminal(t, era)
		}
		id := sp.value
		sp.cleanup = func(t *testing.T) { w.do(t, "DELETE", "/api/sandboxes/ada-box/processes/"+id, owner, "") }
	case "{item}":
		sp.value = "process_failed:" + w.e.failedProcess(t, owner, "ada-box") // fleet_test.go
	case "{signin}":
		r := w.e.do(t, "POST", "/api/fleet/sign-in-tickets", owner, "")
		if r.status != http.StatusCreated {
			t.Fatalf("POST /api/fleet/sign-in-tickets = %d %s", r.status, r.raw)
		}
		sp.value = r.body["ticket"].(string)
	case "{grant}":
		if w.grant == "" {
			w.grant = w.oauthGrant(t) // oauth_test.go
		}
		return w.grant
	case "{fgrant}":
		sp.value = w.oauthGrant(t)
	case "{ses}", "{turn}", "{fses}", "{job}":
		sp.value = w.turnsPlaceholder(t, name) // sessions_test.go
		if name != "{fses}" {
			return sp.value
		}
	default:
		t.Fatalf("no fixture for placeholder %s", name)
	}
	w.spares[name] = sp
	return sp.value
}

// keep keeps the cell's fresh placeholders for the next cell when the row refused the call
// (outcome), and lets them go when it succeeded.
func (w *world) keep(t *testing.T, outcome string) {
	if !strings.HasPrefix(outcome, "2") && !strings.HasPrefix(outcome, "ok") {
		return
	}
	w.dropSpares(t)
}

// dropSpares undoes the spares and forgets them.
func (w *world) dropSpares(t *testing.T) {
	for name, sp := range w.spares {
		if sp.cleanup != nil {
			sp.cleanup(t)
		}
		delete(w.spares, name)
	}
}

// token is the cell's caller's token: the bound columns' are bound to the sandbox the row acts
// on.
func (c *cell) token(t *testing.T) string {
	t.Helper()
	if c.sandbox == "ada-box" || (c.col != boundOwnCol && c.col != boundOtherCol) {
		return c.w.tokens[c.col]
	}
	b, ok := c.w.bound[c.sandbox]
	if !ok {
		_, b[0] = c.w.e.newToken(t, c.w.tokens[ownerCol], `{"scopes": ["user", "mcp"], "sandbox": "`+c.sandbox+`"}`)
		b[1] = c.w.inject(t, "bob", c.sandbox, time.Time{})
		c.w.bound[c.sandbox] = b
	}
	return b[c.col-boundOwnCol]
}

func (c *cell) expand(s string) string {
	for k, v := range c.vars {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// run calls the cell's row and returns its outcome.
func (c *cell) run(t *testing.T, r row) string {
	t.Helper()
	tok := c.token(t)
	if r.do.tool != "" {
		return c.w.callTool(t, c.era, c.col, tok, r.do.tool, c.expand(r.do.body), c.vars[r.do.listed])
	}
	if r.do.resource != "" {
		return c.w.onResource(t, c.era, c.col, tok, r.do.resource, c.expand(r.do.body), c.vars[r.do.listed]) // mcpresources_test.go
	}
	if r.do.access != "" {
		return c.w.daemonRequest(t, r.do, c.vars["{sb}"], tok)
	}
	out, body := c.w.request(t, r.do.method, c.expand(r.do.path), tok, c.expand(r.do.body))
	if r.do.listed != "" && out == "200" && !strings.Contains(body, `"`+c.vars[r.do.listed]+`"`) {
		out = "200, hidden"
	}
	return out
}

// request makes a REST request and returns its status and, unless it is an event stream (which
// it closes once the status is in), its body.
func (w *world) request(t *testing.T, method, path, token, body string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), isolationTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, w.e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && method == "GET" {
		return strconv.Itoa(resp.StatusCode), "" // a live stream (a process's, a watch, the fleet) runs on
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return strconv.Itoa(resp.StatusCode), string(raw)
}

// daemonRequest calls sandbox's daemon through /e2b/sandbox as E2B's SDK does, with the access
// token a.access names for the caller's token, and returns the status.
func (w *world) daemonRequest(t *testing.T, a action, sandbox, token string) string {
	t.Helper()
	access := token
	if a.access == "grant" {
		sum := sha256.Sum256([]byte(token))
		tok, err := w.e.store.TokenByHash(context.Background(), hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatalf("the caller's token: %v", err)
		}
		// An admin principal of the caller's token id may mint a grant for any sandbox; what the
		// grant stands for is only the token id and the sandbox.
		admin := auth.Principal{TokenID: tok.ID, User: tok.User, Scopes: []auth.Scope{auth.ScopeAdmin}}
		if access, err = w.e.grants.Mint(context.Background(), admin, sandbox); err != nil {
			t.Fatalf("mint the caller's envdAccessToken: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), isolationTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, a.method, w.e.url+a.path, strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", sandbox)
	req.Header.Set("X-Access-Token", access)
	if a.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", a.method, a.path, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return strconv.Itoa(resp.StatusCode)
}

func (w *world) do(t *testing.T, method, path, token, body string) string {
	t.Helper()
	out, _ := w.request(t, method, path, token, body)
	return out
}

// session is the MCP session of a column in an era, made on first use; nil when the endpoint
// refuses the token (status says how).
func (w *world) session(t *testing.T, era string, col int, token string) (*mcp.ClientSession, string) {
	t.Helper()
	if s, ok := w.clients[era][col]; ok {
		if s == nil {
			return nil, w.refused[col]
		}
		return s, ""
	}
	// A plain request first, to see the status a refused token gets.
	init := `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "` + era + `", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}`
	req, _ := http.NewRequest("POST", w.e.url+"/mcp", strings.NewReader(init))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", era)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if w.clients[era] == nil {
		w.clients[era] = map[int]*mcp.ClientSession{}
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		w.clients[era][col] = nil
		w.refused[col] = strconv.Itoa(resp.StatusCode)
		return nil, w.refused[col]
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "isolation", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: w.e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), isolationTimeout)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect %s as %s: %v", era, callers[col].name, err)
	}
	w.top.Cleanup(func() { s.Close() })
	w.clients[era][col] = s
	return s, ""
}

// callTool calls an MCP tool and returns its outcome.
func (w *world) callTool(t *testing.T, era string, col int, token, name, args, listed string) string {
	t.Helper()
	s, refused := w.session(t, era, col, token)
	if s == nil {
		return refused
	}
	res, err := w.call(s, name, args)
	if err != nil {
		return "call failed: " + err.Error()
	}
	if res.IsError {
		text := res.Content[0].(*mcp.TextContent).Text
		for _, nf := range []string{"no such sandbox", "no such process", "There is no terminal", "no such session"} {
			if strings.Contains(text, nf) {
				return "not found"
			}
		}
		return "tool error: " + text
	}
	if listed != "" {
		b, _ := json.Marshal(res.StructuredContent)
		if !bytes.Contains(b, []byte(`"`+listed+`"`)) {
			return "ok, hidden"
		}
	}
	return "ok"
}

func (w *world) call(s *mcp.ClientSession, name, args string) (*mcp.CallToolResult, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: name, Arguments: m}
	if m["stream"] == true {
		params.SetProgressToken("isolation")
	}
	ctx, cancel := context.WithTimeout(context.Background(), isolationTimeout)
	defer cancel()
	return s.CallTool(ctx, params)
}

// openTerminal opens a terminal (cat on a pseudo-terminal) with the owner's token.
func (w *world) openTerminal(t *testing.T, era string) string {
	t.Helper()
	s, _ := w.session(t, era, ownerCol, w.tokens[ownerCol])
	res, err := w.call(s, "terminal_open", `{"sandbox": "ada-box", "command": "cat"}`)
	if err != nil || res.IsError {
		t.Fatalf("terminal_open: %v %+v", err, res)
	}
	id, _ := res.StructuredContent.(map[string]any)["terminal_id"].(string)
	if id == "" {
		t.Fatalf("terminal_open gave no terminal_id: %+v", res.StructuredContent)
	}
	return id
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestIsolationMatrix calls every row of matrix as every caller and checks the outcome.
func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, r := range matrix {
		t.Run(r.name, func(t *testing.T) {
			eras := []string{""}
			if r.do.tool != "" || r.do.resource != "" {
				eras = mcpEras
			}
			for col := range nCallers {
				for _, era := range eras {
					c := w.prepare(t, r, col, era)
					got := c.run(t, r)
					if got != r.want[col] {
						t.Errorf("as %s %s: %s, want %s", callers[col].name, era, got, r.want[col])
					}
					w.keep(t, got)
				}
			}
			w.dropSpares(t)
		})
	}
}

// The generated part of docs/security.md lies between these lines.
const (
	docPath  = "../../docs/security.md"
	docBegin = "<!-- isolation matrix: generated from internal/rest/isolation_test.go by TestSecurityDocTable; HANGAR_UPDATE_DOCS=1 rewrites it -->"
	docEnd   = "<!-- end of the isolation matrix -->"
)

// renderMatrix is the matrix as docs/security.md shows it: the callers, the placeholders, and
// one line per row.
func renderMatrix() string {
	var b strings.Builder
	b.WriteString("| Column | Caller |\n|---|---|\n")
	for _, c := range callers {
		fmt.Fprintf(&b, "| %s | %s |\n", c.name, c.doc)
	}
	b.WriteString("\n| Placeholder | Stands for |\n|---|---|\n")
	for _, p := range placeholders {
		fmt.Fprintf(&b, "| `%s` | %s |\n", p.name, codeSpans(p.doc))
	}
	b.WriteString("\n| Route or tool |")
	for _, c := range callers {
		b.WriteString(" " + c.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", nCallers) + "\n")
	for _, r := range matrix {
		b.WriteString("| `" + r.name + "` |")
		for _, o := range r.want {
			b.WriteString(" " + o + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// codeSpans puts the placeholders in prose in code spans.
func codeSpans(s string) string {
	for _, p := range placeholders {
		s = strings.ReplaceAll(s, p.name, "`"+p.name+"`")
	}
	return s
}

// TestSecurityDocTable fails when docs/security.md's matrix is not this file's; with
// HANGAR_UPDATE_DOCS=1 it rewrites the page's matrix instead.
func TestSecurityDocTable(t *testing.T) {
	t.Parallel()
	doctest.Generated(t, docPath, docBegin, docEnd, renderMatrix(),
		"HANGAR_UPDATE_DOCS=1 go test ./internal/rest -run TestSecurityDocTable")
}

// TestBoundTokenTakeover is the attack the isolation matrix was made for: bob asks for a token
// bound to ada's sandbox (or to a name she has not made yet) and uses it. Every step is refused,
// with the answer a name nobody has gets.
func TestBoundTokenTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "ada-box", `, "daemon": false`)
	wantError(t, e.do(t, "POST", "/api/tokens", bob, `{"scopes": ["user", "mcp"], "sandbox": "ada-box"}`), http.StatusNotFound, "not_found")
	wantError(t, e.do(t, "POST", "/api/tokens", bob, `{"scopes": ["user", "mcp"], "sandbox": "ada-later"}`), http.StatusNotFound, "not_found")
	e.sandbox(t, ada, "ada-later", `, "daemon": false`)
	// An admin binding a token to ada's sandbox makes ada's token, not bob's.
	wantError(t, e.do(t, "POST", "/api/tokens", e.admin, `{"user": "bob", "scopes": ["mcp"], "sandbox": "ada-box"}`), http.StatusBadRequest, "bad_request")
	if r := e.do(t, "POST", "/api/tokens", e.admin, `{"scopes": ["mcp"], "sandbox": "ada-box"}`); r.status != http.StatusCreated || r.body["user"] != "ada" {
		t.Errorf("admin's token bound to ada-box = %d %s, want ada's", r.status, r.raw)
	}
	wantError(t, e.do(t, "POST", "/api/tokens", e.admin, `{"scopes": ["admin"], "sandbox": "ada-box"}`), http.StatusBadRequest, "bad_request")
}

// TestBoundTokenDoesNotFollowName: a bound token whose sandbox was destroyed does not reach the
// sandbox another user then makes under the same name.
func TestBoundTokenDoesNotFollowName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ada := e.newToken(t, e.admin, `{"user": "ada", "scopes": ["user", "mcp"]}`)
	_, bob := e.newToken(t, e.admin, `{"user": "bob", "scopes": ["user", "mcp"]}`)
	e.sandbox(t, ada, "box", `, "daemon": false`)
	_, agent := e.newToken(t, ada, `{"scopes": ["user", "mcp"], "sandbox": "box"}`)
	if r := e.do(t, "DELETE", "/api/sandboxes/box", ada, ""); r.status != http.StatusNoContent {
		t.Fatalf("destroy box = %d %s", r.status, r.raw)
	}
	e.sandbox(t, bob, "box", `, "daemon": false`)
	wantError(t, e.do(t, "GET", "/api/sandboxes/box", agent, ""), http.StatusNotFound, "not_found")
	wantError(t, e.exec(t, agent, "box", `{"command": "true"}`), http.StatusNotFound, "not_found")
	if r := e.do(t, "GET", "/api/sandboxes", agent, ""); r.status != http.StatusOK || strings.Contains(r.raw, `"box"`) {
		t.Errorf("the agent lists %d %s", r.status, r.raw)
	}
}
