package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hangar-dev/hangar/internal/logtail"
)

// runTail runs `hangar tail` (internal/logtail): a file changed under it prints why on stderr
// and exits with logtail.ExitChanged, so its reader can tell it from a failure to start.
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := logtail.Main(ctx, args, stdout, stderr)
	var ee *logtail.ExitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stderr, "hangar tail: %v\n", ee.Err)
		return exitCode(ee.Code)
	}
	return err
}
