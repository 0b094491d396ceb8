package mcp

import (
	"context"
	"maps"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// Subscriptions to the event and watch resources, in both eras: resources/subscribe (2025-era
// sessions) and subscriptions/listen (2026-07-28; the SDK turns each URI of a listen into a
// subscribe and an unsubscribe when the listen ends). New events send
// notifications/resources/updated: the first at once, then at most one per 250 ms for each
// subscription, covering all that was recorded meanwhile.
//
// Each subscription is a domain stream that says "something new exists" (turns'
// SessionUpdates and JobUpdates, watch's Updates), coalesced by the stream itself
// (stream.UpdateEvery); its one writer, run, renders each batch as one
// notifications/resources/updated. It counts against the token's HANGAR_STREAM_MAX_PER_TOKEN
// like an SSE stream, and ends when its token is revoked, its sandbox is destroyed or paused,
// it is open HANGAR_STREAM_MAX_HOURS, what it follows is no longer the subscriber's, or hangar
// shuts down.
//
// Who hears what. The SDK's Server.ResourceUpdated notifies every session subscribed to a URI
// string, but a URI string is not a session: a session's name may mean another session for
// another person. So each subscription's stream is resolved once, for its subscriber, to one
// session, job or watch; its notifications carry the subscription's id in _meta
// (metaSubscription), and deliverUpdates, a sending middleware, passes a notification only to
// the session that holds that subscription, with the mark removed. A notification without a
// mark goes to no one.
//
// A subscriptions/listen whose subscription ends that way is ended (its final result), so its
// client knows to listen again; a 2025-era subscription just stops (a revoked token's sessions
// are closed by Run).

// metaSubscription is the _meta key that says which subscription a notification is for. It
// never leaves hangar: deliverUpdates removes it.
const metaSubscription = "hangar.dev/subscription"

// subscriptions are the open subscriptions, by id and by SDK session, and the
// subscriptions/listen requests in flight.
type subscriptions struct {
	mu        sync.Mutex // guards the maps, next and closing
	byID      map[string]*subscription
	bySession map[*mcp.ServerSession]*sessionSubs
	next      uint64
	listens   map[*mcp.ServerSession]context.CancelFunc // ends a listen with its final result
	closing   bool                                      // Shutdown began: listens end at once

	wg sync.WaitGroup // the subscriptions' goroutines and the sessions' watchers
}

// sessionSubs are one SDK session's subscriptions.
type sessionSubs struct {
	closed chan struct{} // closed once the session has ended
	byURI  map[string]*subscription
}

// subscription is one session's subscription to one URI. Its goroutine (run) is its stream's
// one writer.
type subscription struct {
	id     string
	ss     *mcp.ServerSession
	uri    string
	st     *stream.Stream
	cancel context.CancelFunc // unsubscribes
	// ready is closed once the SDK has recorded the subscription (subscribed), after the
	// SubscribeHandler returned: an update sent before is dropped by the SDK, so run waits.
	ready     chan struct{}
	readyOnce sync.Once
}

func newSubscriptions() *subscriptions {
	return &subscriptions{byID: map[string]*subscription{}, bySession: map[*mcp.ServerSession]*sessionSubs{},
		listens: map[*mcp.ServerSession]context.CancelFunc{}}
}

// subscribe is the SDK's SubscribeHandler: it opens the URI's stream for the caller and
// starts the subscription. Anything the caller may not read is "Resource not found".
func (h *Handler) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	p, ok := callerOf(ctx, req.Extra)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	var st *stream.Stream
	var err error
	if isWatchURI(uri) {
		st, err = h.watchUpdates(ctx, p, uri)
	} else {
		st, err = h.eventUpdates(ctx, p, uri)
	}
	if err != nil {
		return err
	}
	h.startSubscription(req.Session, uri, st)
	return nil
}

// eventUpdates opens the updates of an event resource's session or job for p.
func (h *Handler) eventUpdates(ctx context.Context, p auth.Principal, uri string) (*stream.Stream, error) {
	if h.cfg.Turns == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	t, err := parseEventsURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if t.query {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Subscribe to the resource without ?since (" +
			"hangar://sessions/<name>/events or hangar://jobs/<id>/events); read it with ?since= when told it changed."}
	}
	var st *stream.Stream
	if t.job {
		st, err = h.cfg.Turns.JobUpdates(ctx, p, t.ref)
	} else {
		st, err = h.cfg.Turns.SessionUpdates(ctx, p, t.ref)
	}
	if err != nil {
		return nil, h.resourceError(uri, "subscribe "+uri, err)
	}
	return st, nil
}

// unsubscribe is the SDK's UnsubscribeHandler. Unsubscribing from what one is not subscribed
// to is no error.
func (h *Handler) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s := h.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.bySession[req.Session]; e != nil {
		if sub := e.byURI[req.Params.URI]; sub != nil {
			sub.cancel()
			s.forgetLocked(sub)
		}
	}
	return nil
}

// startSubscription records the subscription and starts its writer; a second subscription
// of a session to one URI is the first one.
func (h *Handler) startSubscription(ss *mcp.ServerSession, uri string, st *stream.Stream) {
	s := h.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.bySession[ss]
	if e == nil {
		e = &sessionSubs{closed: make(chan struct{}), byURI: map[string]*subscription{}}
		s.bySession[ss] = e
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ss.Wait() // returns once the session is closed, by its client, an idle timeout or Shutdown
			close(e.closed)
			s.mu.Lock()
			for _, sub := range e.byURI {
				sub.cancel()
			}
			delete(s.bySession, ss)
			s.mu.Unlock()
		}()
	}
	if _, ok := e.byURI[uri]; ok {
		st.Close()
		return
	}
	s.next++
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscription{id: strconv.FormatUint(s.next, 10), ss: ss, uri: uri, st: st, cancel: cancel, ready: make(chan struct{})}
	e.byURI[uri] = sub
	s.byID[sub.id] = sub
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		h.run(ctx, sub, e.closed)
	}()
}

// forgetLocked removes sub from the maps, if it is still there.
func (s *subscriptions) forgetLocked(sub *subscription) {
	if s.byID[sub.id] != sub {
		return
	}
	delete(s.byID, sub.id)
	if e := s.bySession[sub.ss]; e != nil && e.byURI[sub.uri] == sub {
		delete(e.byURI, sub.uri)
	}
}

// holds reports whether the subscription id is ss's subscription to uri.
func (s *subscriptions) holds(ss *mcp.ServerSession, uri, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.byID[id]
	return sub != nil && sub.ss == ss && sub.uri == uri
}

// run is the subscription's one writer: it renders each batch of its stream as one
// notifications/resources/updated until the subscription ends, unsubscribed or its session
// closed (ctx), or its stream ended. A stream that ended on hangar's side ends the session's
// subscriptions/listen too, so its client knows to listen again.
func (h *Handler) run(ctx context.Context, sub *subscription, closed <-chan struct{}) {
	defer sub.cancel()
	select { // what comes meanwhile waits in the stream
	case <-sub.ready:
	case <-ctx.Done():
	}
	reason := sub.st.Render(ctx, 0, func(items []stream.Item) error {
		if len(items) > 0 {
			h.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: sub.uri, Meta: mcp.Meta{metaSubscription: sub.id}})
		}
		return nil
	})
	sub.st.Close()
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	h.subs.forgetLocked(sub)
	select {
	case <-closed:
		return
	default:
	}
	if reason != stream.ReasonClient {
		if end := h.subs.listens[sub.ss]; end != nil {
			end()
		}
	}
}

// subscribed is a receiving middleware that tells a 2025-era subscription's writer when the SDK
// has recorded the subscription: the SDK calls the SubscribeHandler first, and drops the
// updates sent before it records it (a lost notification, once in six runs of the tests in
// parallel). A 2026-07-28 listen's are told by its acknowledgement (deliverUpdates).
func (h *Handler) subscribed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if sr, ok := req.(*mcp.SubscribeRequest); ok && method == "resources/subscribe" && sr.Params != nil {
			h.subs.recorded(sr.Session, sr.Params.URI)
		}
		return res, err
	}
}

// recorded says the SDK has recorded ss's subscription to uri ("" : all of ss's so far).
func (s *subscriptions) recorded(ss *mcp.ServerSession, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.bySession[ss]
	if e == nil {
		return
	}
	for u, sub := range e.byURI {
		if uri == "" || u == uri {
			sub.readyOnce.Do(func() { close(sub.ready) })
		}
	}
}

// endableListens is a receiving middleware that makes each subscriptions/listen endable from
// hangar's side with its final result. The SDK's listen waits for its context to end and then
// answers; closing its session instead (ServerSession.Close) ends it with no answer, as a
// closing connection writes nothing more. So each listen runs under a context of its own,
// which Shutdown and a subscription's end cancel. A listen counts as a call in flight until its
// answer is written, so Shutdown waits for it.
func (h *Handler) endableListens(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if method != "subscriptions/listen" || ss == nil {
			return next(ctx, method, req)
		}
		if extra := req.GetExtra(); extra != nil {
			if sk := h.sinkOf(extra.Header); sk != nil {
				h.running.Enter()
				sk.whenClosed(h.running.Leave)
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s := h.subs
		s.mu.Lock()
		if s.closing {
			cancel()
		}
		s.listens[ss] = cancel
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.listens, ss)
			s.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}

// endListens ends every subscriptions/listen with its final result, and those that come later
// at once (Shutdown).
func (s *subscriptions) endListens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for _, end := range s.listens {
		end()
	}
}

// deliverUpdates is a sending middleware: a notifications/resources/updated reaches a session
// only if it is for that session's own subscription (see above), without the mark.
func (h *Handler) deliverUpdates(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/subscriptions/acknowledged" {
			// A 2026-07-28 listen's subscriptions are recorded by the SDK before it says so.
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				h.subs.recorded(ss, "")
			}
		}
		if method != "notifications/resources/updated" {
			return next(ctx, method, req)
		}
		params, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if params == nil || ss == nil {
			return nil, nil
		}
		id, _ := params.Meta[metaSubscription].(string)
		if id == "" || !h.subs.holds(ss, params.URI, id) {
			return nil, nil // another session's subscription, or no one's
		}
		meta := maps.Clone(params.Meta) // the SDK shares params among the sessions it notifies
		delete(meta, metaSubscription)
		if len(meta) == 0 {
			meta = nil
		}
		return next(ctx, method, &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{
			Session: ss, Params: &mcp.ResourceUpdatedNotificationParams{URI: params.URI, Meta: meta}})
	}
}

// waitSubscriptions waits (until ctx ends) for the subscriptions' goroutines, once their
// sessions are closed.
func (h *Handler) waitSubscriptions(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.subs.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
