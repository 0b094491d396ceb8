package provider

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/internal/envd"
)

// Healthy asks the daemon at url for GET /health once (envd.Client.Health), through client
// (nil: http.DefaultClient), within client's Timeout (envd's client keeps its transport, not
// its timeout): a daemon that takes connections and never answers must not hold the caller.
func Healthy(ctx context.Context, client *http.Client, url string) error {
	client = orDefault(client)
	c, err := envd.New(envd.Config{URL: url, HTTPClient: client})
	if err != nil {
		return err
	}
	if client.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, client.Timeout)
		defer cancel()
	}
	return c.Health(ctx)
}

// WaitHealthy waits for the daemon at url to answer GET /health, as w says
// (envd.Client.WaitHealthy): the providers' one health wait. Each ask is bounded by client's
// Timeout unless w.Ask says otherwise.
func WaitHealthy(ctx context.Context, client *http.Client, url string, w envd.Wait) error {
	client = orDefault(client)
	if w.Ask == 0 {
		w.Ask = client.Timeout
	}
	c, err := envd.New(envd.Config{URL: url, HTTPClient: client})
	if err != nil {
		return err
	}
	return c.WaitHealthy(ctx, w)
}

func orDefault(client *http.Client) *http.Client {
	if client == nil {
		return http.DefaultClient
	}
	return client
}
