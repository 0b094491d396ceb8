package sqlstore

import (
	"database/sql"
	"testing"
	"time"
)

// TestNumberedParameters: PostgreSQL's dialect numbers each ? in order; SQLite's keeps them.
func TestNumberedParameters(t *testing.T) {
	t.Parallel()
	const query = "UPDATE t SET a = ?, b = ? WHERE c = ? AND d = 'é'"
	if got := (&DB{d: Dialect{Numbered: true}}).q(query); got != "UPDATE t SET a = $1, b = $2 WHERE c = $3 AND d = 'é'" {
		t.Errorf("numbered q = %q", got)
	}
	if got := (&DB{}).q(query); got != query {
		t.Errorf("unnumbered q = %q, want it unchanged", got)
	}
}

// TestMillis: the zero time is NULL and back; any other time keeps its milliseconds.
func TestMillis(t *testing.T) {
	t.Parallel()
	if n := millis(time.Time{}); n.Valid {
		t.Errorf("millis(zero) = %v, want NULL", n)
	}
	if got := fromMillis(sql.NullInt64{}); !got.IsZero() {
		t.Errorf("fromMillis(NULL) = %v, want the zero time", got)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	if got := fromMillis(millis(at)); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("round trip of %v = %v", at, got)
	}
}
