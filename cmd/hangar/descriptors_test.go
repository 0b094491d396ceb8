package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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
	wrapper := filepath.Join(dir, "hangar")
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nulimit -n 96 || exit 1\nexec %q \"$@\"\n", bin)), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := providertest.NewServe(wrapper, filepath.Join(dir, "data"), "--stream-max-per-token", "1000", "--stream-max-per-user", "1000",
		"--stream-max-total", "1000",
		// One store connection, open from the start: a pool that opened one more as the last
		// descriptors went could take the one the listener frees to answer (see shed).
		"--database-max-conns", "1")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), waitTimeout)
	defer scancel()
	if err := srv.Start(sctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	token, err := srv.AdminToken()
	if err != nil {
		t.Fatal(err)
	}
	url, logs := srv.URL, srv.Logs

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
