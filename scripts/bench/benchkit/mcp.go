package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Subscriber is an MCP client of the server (go-sdk's, the 2025-11-25 revision) subscribed to
// resources: Updated gets a value (without blocking) whenever one of them is updated.
type Subscriber struct {
	Session *mcp.ClientSession
	Updated chan struct{}
}

// Subscribe connects an MCP client with the server's token and subscribes it to uri.
func (s *Server) Subscribe(ctx context.Context, uri string) (*Subscriber, error) {
	sub := &Subscriber{Updated: make(chan struct{}, 1)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "hangar-bench", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case sub.Updated <- struct{}{}:
			default: // one pending is enough: the reader reads everything new
			}
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: &http.Client{Transport: Bearer{Token: s.Token, Next: s.HTTP.Transport}}}
	cs, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("connect an MCP client: %w", err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		cs.Close()
		return nil, fmt.Errorf("subscribe to %s: %w", uri, err)
	}
	sub.Session = cs
	return sub, nil
}

// Read reads a resource whose text is JSON into out.
func (s *Subscriber) Read(ctx context.Context, uri string, out any) error {
	res, err := s.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return fmt.Errorf("read %s: %w", uri, err)
	}
	if len(res.Contents) != 1 {
		return fmt.Errorf("read %s: %d contents, want 1", uri, len(res.Contents))
	}
	return json.Unmarshal([]byte(res.Contents[0].Text), out)
}

// Close ends the client's session.
func (s *Subscriber) Close() { s.Session.Close() }

// Bearer adds a token to every request it passes to Next.
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip sends r with the token.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Next.RoundTrip(r)
}
