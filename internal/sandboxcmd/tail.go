package sandboxcmd

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hangar-dev/hangar/internal/logtail"
)

// Tail runs the tail verb (internal/logtail), as name: a file that changed under it (truncated,
// replaced, removed) is said on stderr and exits with logtail's code, so its reader, the turn
// watcher, can tell it from a failure to start.
func Tail(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	err := logtail.Main(ctx, args, stdout, stderr)
	var ee *logtail.ExitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stderr, "%s: %v\n", name, ee.Err)
		return ExitCode(ee.Code)
	}
	return err
}
