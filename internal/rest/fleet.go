package rest

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/problem"

	"github.com/hangar-dev/hangar/internal/stream"
)

// fleetStreamPath is the one route a fleet ticket opens.
const fleetStreamPath = "/api/fleet/stream"

func (a *api) fleetRoutes(r chi.Router) {
	r.Get("/fleet", a.getFleet)
	r.Get("/fleet/stream", a.fleetStream)
	r.Post("/fleet/tickets", a.fleetTicket)
	r.Post("/fleet/sign-in-tickets", a.fleetSignInTicket)
	r.Delete("/fleet/inbox/{item}", a.dismissInbox)
}

// getFleet is GET /api/fleet[?user=]: a person's agents, inbox and summary (another person's
// for an admin).
func (a *api) getFleet(w http.ResponseWriter, r *http.Request) {
	f, err := a.Fleet.Read(r.Context(), principal(r), r.URL.Query().Get("user"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// fleetStream is GET /api/fleet/stream[?user=][&ticket=]: the fleet as SSE, a snapshot then
// its changes; Last-Event-ID (or since) resumes.
func (a *api) fleetStream(w http.ResponseWriter, r *http.Request) {
	resume := r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Get("since") != ""
	a.eventStream(w, r, func(since int64) (*stream.Stream, error) {
		return a.Fleet.Stream(r.Context(), principal(r), r.URL.Query().Get("user"), since, resume)
	})
}

// fleetTicket is POST /api/fleet/tickets: a one-time ticket, valid for a minute, that opens
// the caller's own fleet stream from a browser (GET /api/fleet/stream?ticket=...).
func (a *api) fleetTicket(w http.ResponseWriter, r *http.Request) {
	t, err := a.Fleet.IssueTicket(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

// fleetSignInTicket is POST /api/fleet/sign-in-tickets: a one-time ticket, valid for a minute,
// that signs a Fleet page in as the caller (POST /api/fleet/sign-in): hangar fleet --web puts
// it in the address of the page it opens.
func (a *api) fleetSignInTicket(w http.ResponseWriter, r *http.Request) {
	t, err := a.Fleet.IssueSignIn(r.Context(), principal(r))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

// fleetSignIn is POST /api/fleet/sign-in {"ticket"}, the one route under /api without a
// token (the ticket is the credential): it uses the sign-in ticket up and answers, as POST
// /api/tokens does, the page's own token (auth.Authenticator.PageToken). The ticket comes in
// the body, never in a URL a server or proxy logs.
func (a *api) fleetSignIn(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ticket string `json:"ticket"`
	}
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	id, err := a.Fleet.RedeemSignIn(r.Context(), req.Ticket)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	c, err := a.Auth.PageToken(r.Context(), id)
	a.writeCreated(w, r, c, err)
}

// dismissInbox is DELETE /api/fleet/inbox/{item}: the item leaves the caller's own inbox for
// good (204), on every replica and in every later read.
func (a *api) dismissInbox(w http.ResponseWriter, r *http.Request) {
	// chi gives the segment as sent: a browser escapes the id's colons (%3A).
	item, err := url.PathUnescape(chi.URLParam(r, "item"))
	if err != nil {
		a.writeError(w, r, problem.New(problem.CodeBadRequest, "The inbox item's id is not a valid path segment.", err))
		return
	}
	if err := a.Fleet.Dismiss(r.Context(), principal(r), item); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
