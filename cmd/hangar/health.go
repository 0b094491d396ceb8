package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/internal/settings"
)

const healthSummary = "Asks a running `hangar serve` whether it is ready (GET /readyz) and exits 0 if it is, 1 if not, " +
	"saying which in one sentence. The image's HEALTHCHECK and the chart's `helm test` run it: the image has no curl."

// healthConfig is what `hangar health` asks, and where.
type healthConfig struct {
	listen  string        // serve's HANGAR_LISTEN: the port asked on 127.0.0.1
	url     string        // a whole URL instead (another host: helm test reaches the Service)
	path    string        // /readyz, or /healthz for "the process answers"
	timeout time.Duration // the whole request, connection included
}

func healthSettings(c *healthConfig) []settings.Setting {
	return []settings.Setting{
		{Name: "listen", Arg: "ADDR", Usage: "serve's listener (HANGAR_LISTEN, shared with serve); its port is asked on 127.0.0.1", Value: settings.String{P: &c.listen, Check: settings.HostPort}},
		{Name: "health-url", Arg: "URL", Usage: "ask this URL instead (e.g. http://hangar:8080/readyz from another pod)", Value: settings.String{P: &c.url, Check: settings.HTTPURL}},
		{Name: "health-path", Arg: "PATH", Usage: "the path asked on the local port: /readyz (ready) or /healthz (up)", Value: settings.String{P: &c.path, Check: settings.OneOf("/readyz", "/healthz")}},
		{Name: "health-timeout", Arg: "DURATION", Usage: "how long the whole request may take", Value: settings.Duration{P: &c.timeout, Min: time.Millisecond, Max: time.Hour}},
	}
}

// healthTarget is the URL asked: c.url, else c.path on 127.0.0.1 at c.listen's port (serve may
// listen on 0.0.0.0 or [::], but loopback always reaches it from inside the container).
func healthTarget(c healthConfig) string {
	if c.url != "" {
		return c.url
	}
	_, port, _ := net.SplitHostPort(c.listen) // checked by hostPort when set
	return "http://" + net.JoinHostPort("127.0.0.1", port) + c.path
}

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := healthConfig{listen: "127.0.0.1:8080", path: "/readyz", timeout: 5 * time.Second}
	if err := settings.Parse("hangar health", healthSummary, "HANGAR_", healthSettings(&c), args, settings.LookupEnv, stdout); err != nil {
		return err
	}
	target := healthTarget(c)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("ask %s: %w", target, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s did not answer within %s", target, c.timeout)
		}
		return fmt.Errorf("%s did not answer: %w", target, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: hangar is not %s", target, resp.Status, state(target))
	}
	fmt.Fprintf(stdout, "%s answered %s: hangar is %s.\n", target, resp.Status, state(target))
	return nil
}

// state is what a 200 from target means: /healthz says the process is up, anything else
// (/readyz) that it is ready.
func state(target string) string {
	if strings.HasSuffix(target, "/healthz") {
		return "up"
	}
	return "ready"
}
