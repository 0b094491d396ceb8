package sandboxcmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// Signalled is the cause (context.Cause) of a context that NotifyContext ended.
type Signalled struct{ Signal syscall.Signal }

func (s Signalled) Error() string { return s.Signal.String() + " received" }

// NotifyContext is signal.NotifyContext for SIGINT and SIGTERM whose cause says which of them
// ended it, so that a verb can exit as a program that signal ended (see exitForSignal).
func NotifyContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	got := make(chan os.Signal, 1)
	signal.Notify(got, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-got:
			cancel(Signalled{Signal: s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(got)
		close(done)
		cancel(context.Canceled)
	}
}

// exitForSignal is 128 plus the number of the signal that ended ctx, as a shell reports a
// program that signal killed, or nil when no signal did. A sandbox's daemon stopped by its
// runtime exits so: Kubernetes then records the pod Failed, and keeps the kubelet's reason (an
// eviction's, which a daemon exiting 0 raced into Succeeded with no reason).
func exitForSignal(ctx context.Context) error {
	var s Signalled
	if errors.As(context.Cause(ctx), &s) {
		return ExitCode(128 + int(s.Signal))
	}
	return nil
}
