package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUnavailable: the operating system's ways of saying a database does not answer, or its
// disk is full, are classified; anything else is left as it is.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want error // nil: left as it is
	}{
		{fmt.Errorf("connect: %w", refused), ErrUnavailable},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), ErrUnavailable},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), ErrUnavailable},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), ErrUnavailable},
		{fmt.Errorf("write: %w", syscall.ENOSPC), ErrFull},
		{fmt.Errorf("insert: %w", ErrConflict), nil},
		{errors.New("syntax error"), nil},
		{fmt.Errorf("query: %w", context.Canceled), nil},
	} {
		got := Unavailable(c.err)
		if c.want == nil {
			if got != c.err {
				t.Errorf("Unavailable(%v) = %v, want it unchanged", c.err, got)
			}
			continue
		}
		if !errors.Is(got, c.want) || !errors.Is(got, errors.Unwrap(c.err)) {
			t.Errorf("Unavailable(%v) = %v, want it wrapped in %v, keeping the cause", c.err, got, c.want)
		}
	}
}
