package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// ListUserProcesses implements store.Store.
func (s *DB) ListUserProcesses(ctx context.Context, user string, since time.Time) ([]store.Process, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+processColumns+` FROM processes
		WHERE user_name = ? AND (state = 'running' OR ended_at >= ?) ORDER BY started_at, id`), user, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list the processes of %s: %w", user, err)
	}
	defer rows.Close()
	var out []store.Process
	for rows.Next() {
		p, err := scanProcess(rows)
		if err != nil {
			return nil, fmt.Errorf("list the processes of %s: %w", user, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the processes of %s: %w", user, err)
	}
	return out, nil
}
