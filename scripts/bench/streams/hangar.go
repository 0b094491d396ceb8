package main

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/scripts/bench/benchkit"
)

// server is a `hangar serve` this program started (benchkit.Server), under the names the rest
// of this program uses.
type server struct {
	*benchkit.Server
	url, token, dataDir string
	http                *http.Client
}

// startServer runs bin as `hangar serve` with the given extra environment.
func startServer(ctx context.Context, bin, dir string, env ...string) (*server, error) {
	s, err := benchkit.Start(ctx, bin, dir, env...)
	if err != nil {
		return nil, err
	}
	return &server{Server: s, url: s.URL, token: s.Token, dataDir: s.DataDir, http: s.HTTP}, nil
}

func (s *server) stop() { s.Stop() }

// api does a JSON request and decodes the answer.
func (s *server) api(ctx context.Context, method, path string, body any, out any) error {
	return s.API(ctx, method, path, body, out)
}

// rss is the server process's resident memory in bytes.
func (s *server) rss() int64 { return s.RSS() }
