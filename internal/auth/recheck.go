package auth

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/coder/quartz"
)

// Dead reports whether err, from Authenticate, Check or Recheck, says the token can never act
// again: revoked, expired, or unknown (deleted, or a static token whose line was removed). Any
// other error (the store did not answer) says nothing about the token.
func Dead(err error) bool {
	return errors.Is(err, ErrRevoked) || errors.Is(err, ErrExpired) || errors.Is(err, ErrUnknownToken)
}

// Rechecks checks again, every Every, the tokens that hold something open (streams, MCP
// sessions): the one recheck loop of the stream registry and the MCP handler.
type Rechecks struct {
	// Every is the time between two rounds. Required (> 0).
	Every time.Duration
	// Check says whether a token is still valid for what it opened (Authenticator.Recheck).
	// Nil: tokens are never checked, and each round only calls tokens.
	Check func(ctx context.Context, p Principal) error
	// Clock times the rounds. Nil: the real clock.
	Clock quartz.Clock
	// Tags name the round's ticker, for a test to trap it (quartz).
	Tags []string
	// Logger gets the checks that failed for another reason than a Dead token. Default
	// slog.Default().
	Logger *slog.Logger
}

// Run calls tokens every Every for the principals to check, checks each distinct token once,
// and calls dead with the id of each that is Dead, until ctx ends. A check that fails for
// another reason is logged and the token kept: a store that does not answer ends nothing.
func (r Rechecks) Run(ctx context.Context, tokens func() []Principal, dead func(ctx context.Context, tokenID string)) {
	clock := r.Clock
	if clock == nil {
		clock = quartz.NewReal()
	}
	t := clock.NewTicker(r.Every, r.Tags...)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Round(ctx, tokens(), dead)
		}
	}
}

// Round checks each distinct token of ps once, and calls dead with the id of each that is
// Dead: one of Run's rounds.
func (r Rechecks) Round(ctx context.Context, ps []Principal, dead func(ctx context.Context, tokenID string)) {
	if r.Check == nil {
		return
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if p.TokenID == "" || seen[p.TokenID] {
			continue
		}
		seen[p.TokenID] = true
		err := r.Check(ctx, p)
		switch {
		case err == nil:
		case Dead(err):
			dead(ctx, p.TokenID)
		default:
			// The store did not answer: that says nothing about the token.
			log.Warn("recheck token", "token", p.TokenID, "err", err)
		}
	}
}
