package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// The parts of a sandbox that can die under a command, in DiedError.Part.
const (
	PartDaemon  = "daemon"  // the sandbox's daemon (the sandbox itself may run on)
	PartSandbox = "sandbox" // the sandbox itself: its container, pod or E2B sandbox
)

// DiedError says that a sandbox's daemon, or the sandbox itself, died while hangar used it: a
// failure of the sandbox, not of hangar. It matches ErrUnavailable. The sandbox's state was
// checked again with its provider when the error was made, and stored.
type DiedError struct {
	Sandbox string
	Part    string // PartDaemon or PartSandbox, as far as the provider can tell
	State   string // the sandbox's state after the check
	Reason  string // the provider's reason for that state, if any
	cause   error
}

// Message is a sentence for a person: what died and what the sandbox is now.
func (e *DiedError) Message() string {
	if e.State == string(provider.StateRunning) {
		return fmt.Sprintf("The daemon of sandbox %s stopped answering while hangar used it, but its provider says the sandbox runs and its daemon answers: try again.", e.Sandbox)
	}
	var b strings.Builder
	if e.Part == PartDaemon {
		fmt.Fprintf(&b, "The daemon of sandbox %s stopped answering while hangar used it", e.Sandbox)
	} else {
		fmt.Fprintf(&b, "Sandbox %s stopped while hangar used it", e.Sandbox)
	}
	fmt.Fprintf(&b, "; the sandbox is now %s", e.State)
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	b.WriteString(".")
	return b.String()
}

// Problem says which part died; the cause (an address) stays in the log.
func (e *DiedError) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeUnavailable, Message: e.Message()}
}

func (e *DiedError) Error() string {
	msg := fmt.Sprintf("sandbox %s: its %s died (now %s)", e.Sandbox, e.Part, e.State)
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// Unwrap gives ErrUnavailable and the cause, if any.
func (e *DiedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

// Died is for hangar's other domain packages: after sb's daemon did not answer (cause), it
// checks sb again with its provider and returns the *DiedError that says which part died.
func (m *Manager) Died(ctx context.Context, sb store.Sandbox, cause error) error {
	return m.died(ctx, sb, cause)
}

// died checks sb again with its provider after its daemon's stream broke with cause, stores
// what the provider says, and returns the DiedError that says which part died.
func (m *Manager) died(ctx context.Context, sb store.Sandbox, cause error) *DiedError {
	ctx = context.WithoutCancel(ctx)
	now, err := m.recheck(ctx, sb)
	if err != nil {
		m.log.Warn("check a sandbox whose daemon's stream broke", "sandbox", sb.Name, "err", err)
	}
	e := &DiedError{Sandbox: sb.Name, Part: PartDaemon, State: now.State, Reason: now.Reason, cause: cause}
	if now.State != string(provider.StateRunning) && !strings.Contains(now.Reason, "daemon") {
		e.Part = PartSandbox
	}
	m.log.Warn("a sandbox died under a command", "sandbox", sb.Name, "part", e.Part, "state", e.State, "reason", e.Reason, "err", cause)
	return e
}

// Recheck asks sb's provider for its state now and stores it: for hangar's own use when the
// sandbox's daemon stopped answering. A sandbox the provider no longer has is failed. On an
// error (the provider does not answer) sb is returned as it was. A sandbox destroyed since sb
// was read stays destroyed, and is returned so.
func (m *Manager) Recheck(ctx context.Context, sb store.Sandbox) (store.Sandbox, error) {
	return m.recheck(ctx, sb)
}

func (m *Manager) recheck(ctx context.Context, sb store.Sandbox) (store.Sandbox, error) {
	if m.beingDestroyed(sb.Name) {
		// Its daemon broke because it is being destroyed: what the provider says now (failed,
		// or gone) is the destroy half done, and the destroy stores the end of it.
		return destroyed(sb), nil
	}
	prov, err := m.provider(sb)
	if err != nil {
		return sb, err
	}
	was := sb.State
	got, err := prov.Get(ctx, providerView(sb))
	switch {
	case errors.Is(err, provider.ErrNotFound):
		sb.State, sb.Reason = string(provider.StateFailed), "the provider no longer has this sandbox (removed while hangar was down?)"
	case err != nil:
		return sb, fmt.Errorf("check sandbox %s: %w", sb.Name, err)
	default:
		sb = merge(sb, got, m.cfg.Clock.Now())
	}
	if err := m.save(ctx, sb); errors.Is(err, ErrState) {
		// Destroyed (or its name taken again) while the provider was asked: the store's word
		// stands, and a sandbox of the name made since is not this one.
		return destroyed(sb), nil
	} else if err != nil {
		return sb, err
	}
	if sb.State == string(provider.StateFailed) && was != sb.State {
		// What still streams from it (a session's events, above all) gets nothing more from
		// it: it ends now, saying so, rather than waiting for a sandbox that will not answer.
		m.endStreams(sb.Name, stream.ReasonFailed)
	}
	return sb, nil
}

// destroyed is sb as a destroy leaves it.
func destroyed(sb store.Sandbox) store.Sandbox {
	sb.State, sb.Reason, sb.DaemonURL, sb.DaemonToken = string(provider.StateDestroyed), "", "", ""
	return sb
}
