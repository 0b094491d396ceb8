package envd

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
)

// TestWrapErrKinds: a daemon's code gives the error's kind; a daemon that refused a
// connection for want of a descriptor (Unavailable, "the daemon is out of ...") is exhausted,
// not gone, and says of what; a ResourceExhausted that connect-go made itself is not the
// daemon's.
func TestWrapErrKinds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want error
		what string
	}{
		{connect.NewError(connect.CodeUnavailable, errors.New("connection refused")), ErrUnavailable, ""},
		{connect.NewError(connect.CodeUnavailable, errors.New("the daemon is out of file descriptors: it could not accept a connection")), ErrExhausted, "file descriptors"},
		{connect.NewWireError(connect.CodeResourceExhausted, errors.New("the daemon is out of processes: fork: resource temporarily unavailable")), ErrExhausted, "processes"},
		// The client's own, not the daemon's: no resource of the daemon's is out.
		{connect.NewError(connect.CodeResourceExhausted, errors.New("message size 5000000 is larger than configured max 4194304")), ErrDaemon, ""},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("no such file")), ErrInvalidArgument, ""},
	} {
		err := wrapErr(context.Background(), "start process", c.err)
		if !errors.Is(err, c.want) {
			t.Errorf("wrapErr(%v) = %v, want %v", c.err, err, c.want)
		}
		if what, ok := Exhausted(err); c.what != "" && (!ok || what != c.what) {
			t.Errorf("Exhausted(%v) = %q, %v; want %q", err, what, ok, c.what)
		}
	}
}
