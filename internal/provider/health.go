package provider

import (
	"context"
	"net/http"

	"github.com/hangar-dev/hangar/internal/envd"
)

// Healthy asks the daemon at url for GET /health once (envd.Client.Health), through client
// (nil: http.DefaultClient).
func Healthy(ctx context.Context, client *http.Client, url string) error {
	c, err := envd.New(envd.Config{URL: url, HTTPClient: orDefault(client)})
	if err != nil {
		return err
	}
	return c.Health(ctx)
}

// WaitHealthy waits for the daemon at url to answer GET /health, as w says
// (envd.Client.WaitHealthy): the providers' one health wait.
func WaitHealthy(ctx context.Context, client *http.Client, url string, w envd.Wait) error {
	c, err := envd.New(envd.Config{URL: url, HTTPClient: orDefault(client)})
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
