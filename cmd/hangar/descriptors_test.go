package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestOutOfDescriptorsIs503: a hangar out of file descriptors (hangar serve under ulimit -n
// 96, filled by the fleet streams it holds open) answers the next connection 503 with a
// sentence that names what ran out, instead of leaving it waiting in the backlog; once some
// streams close, it takes new ones again.
func TestOutOfDescriptorsIs503(t *testing.T) {
	t.Parallel()
	bin, err := providertest.SharedHangar()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "descriptors-test-token-0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+" ada user,mcp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n 96 && exec "$0" serve`, bin)
	cmd.Env = append(os.Environ(), "HANGAR_LISTEN="+addr, "HANGAR_DATA_DIR="+filepath.Join(dir, "data"), "HANGAR_TOKENS_FILE="+tokens,
		"HANGAR_STREAM_MAX_PER_TOKEN=1000", "HANGAR_STREAM_MAX_PER_USER=1000", "HANGAR_STREAM_MAX_TOTAL=1000", "HANGAR_LOG_LEVEL=warn",
		// One store connection, open from the start: a pool that opened one more as the last
		// descriptors went could take the one the listener frees to answer (see shed).
		"HANGAR_DATABASE_MAX_CONNS=1")
	var logs providertest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := "http://" + addr
	// Another process: polled until it listens, there is no event to wait on.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("hangar did not answer /healthz: %v\n%s", err, logs.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/fleet/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		// Without an answer in waitTimeout, the connection waits in the backlog: a failure.
		return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: waitTimeout}}).Do(req)
	}
	var streams []*http.Response
	defer func() {
		for _, s := range streams {
			s.Body.Close()
		}
	}()
	var refused *http.Response
	for len(streams) < 200 && refused == nil {
		resp, err := open()
		switch {
		case err != nil:
			t.Fatalf("stream %d: %v (a hangar out of descriptors must answer, not drop the connection)\n%s", len(streams)+1, err, logs.String())
		case resp.StatusCode == http.StatusOK:
			streams = append(streams, resp)
		default:
			refused = resp
		}
	}
	if refused == nil {
		t.Fatalf("200 streams open under a limit of 96 descriptors: none was refused")
	}
	body, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "out of file descriptors") || refused.Header.Get("Retry-After") == "" {
		t.Errorf("after %d streams: %d (Retry-After %q) %s; want 503 with Retry-After saying hangar is out of file descriptors",
			len(streams), refused.StatusCode, refused.Header.Get("Retry-After"), body)
	}
	t.Logf("refused after %d open streams: %s", len(streams), body)

	// Half closed, their descriptors come back and a new stream is taken again (hangar sees
	// the connections close on its own time: polled).
	for _, s := range streams[len(streams)/2:] {
		s.Body.Close()
	}
	streams = streams[:len(streams)/2]
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		resp, err := open()
		if err != nil {
			return false, nil
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return false, nil
		}
		streams = append(streams, resp)
		return true, nil
	})
	if err != nil {
		t.Fatalf("no stream taken after half of them closed: %v", err)
	}
}
