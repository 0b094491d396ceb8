package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/store/storetest"
)

// metricsOf returns a server's /metrics.
func metricsOf(t *testing.T, ts *testServer) string {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestReplicasOnlyWithPostgres: with SQLite nothing of several replicas runs (no lease
// metrics, no log line); with PostgreSQL a serve is one of the replicas on its database.
func TestReplicasOnlyWithPostgres(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		ts := startServe(t, testConfig(t))
		if m := metricsOf(t, ts); strings.Contains(m, "hangar_leases_held") {
			t.Error("a SQLite serve exports hangar_leases_held")
		}
		if strings.Contains(ts.stderr.String(), "one of several replicas") {
			t.Error("a SQLite serve joined replicas")
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t)
		cfg.DatabaseURL = storetest.FreshSchema(t, storetest.PostgresURL(t))
		ts := startServe(t, cfg)
		m := metricsOf(t, ts)
		for _, want := range []string{"hangar_leases_held 0", "hangar_lease_losses_total 0"} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if !strings.Contains(ts.stderr.String(), "one of several replicas") {
			t.Error("a PostgreSQL serve did not say it is one of several replicas")
		}
	})
}
