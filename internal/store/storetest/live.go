package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/store"
)

// testLiveTokens: a user's live tokens are those neither revoked nor expired, plus the OAuth
// grants that can still issue a token, each counted once however many access tokens it made;
// CreateTokenWithin and CreateOAuthGrantWithin refuse past the bound (ErrLimit, nothing stored)
// and count only the user's own.
func testLiveTokens(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	mustUser(t, ctx, s, "bob")
	now := time.UnixMilli(time.Now().UnixMilli())
	live := func(want int) {
		t.Helper()
		if n, err := s.LiveTokens(ctx, "ada", now); err != nil || n != want {
			t.Fatalf("LiveTokens = %d, %v; want %d", n, err, want)
		}
	}
	if err := s.CreateTokenWithin(ctx, newToken("tok_1", "ada"), 3, now); err != nil {
		t.Fatal(err)
	}
	expired := newToken("tok_2", "ada")
	expired.ExpiresAt = now
	revoked := newToken("tok_3", "ada")
	for _, tk := range []store.Token{expired, revoked, newToken("tok_b", "bob")} {
		if err := s.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RevokeToken(ctx, revoked.ID, now); err != nil {
		t.Fatal(err)
	}
	live(1)
	g := newGrant(t, ctx, s, "gr_1") // its code is unused: it can issue a token
	live(2)
	for i, rt := range []string{"rt-1", "rt-2"} { // two refreshes: two access tokens, one grant
		tk := newToken(fmt.Sprintf("tok_g%d", i), "ada")
		if err := s.AddOAuthToken(ctx, g.ID, tk, &store.OAuthRefresh{Hash: rt, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UseOAuthCode(ctx, "code-gr_1", now); err != nil {
		t.Fatal(err)
	}
	live(2)
	if err := s.CreateTokenWithin(ctx, newToken("tok_4", "ada"), 3, now); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTokenWithin(ctx, newToken("tok_5", "ada"), 3, now); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("CreateTokenWithin past the bound: %v, want ErrLimit", err)
	}
	if _, err := s.TokenByID(ctx, "tok_5"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused token was stored: %v", err)
	}
	code := store.OAuthCode{Hash: "code-gr_2", CodeChallenge: "c", ExpiresAt: now.Add(time.Minute)}
	g2 := g
	g2.ID = "gr_2"
	if err := s.CreateOAuthGrantWithin(ctx, g2, code, 3, now); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("CreateOAuthGrantWithin past the bound: %v, want ErrLimit", err)
	}
	if _, err := s.GetOAuthGrant(ctx, "gr_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused grant was stored: %v", err)
	}
	if err := s.CreateTokenWithin(ctx, newToken("tok_b2", "bob"), 3, now); err != nil {
		t.Errorf("bob's token, with ada at her bound: %v", err)
	}
	if _, err := s.RevokeOAuthGrant(ctx, g.ID, now); err != nil {
		t.Fatal(err)
	}
	live(2)
	if err := s.CreateOAuthGrantWithin(ctx, g2, code, 3, now); err != nil {
		t.Errorf("a grant once another was revoked: %v", err)
	}
	live(3)
}

// testLiveTokensConcurrent: many CreateTokenWithin at once for one user store no more than the
// bound.
func testLiveTokensConcurrent(t *testing.T, ctx context.Context, s store.Store) {
	mustUser(t, ctx, s, "ada")
	now := time.UnixMilli(time.Now().UnixMilli())
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.CreateTokenWithin(ctx, newToken(fmt.Sprintf("tok_%02d", i), "ada"), 5, now)
			for errors.Is(err, store.ErrUnavailable) { // SQLite: another writer held it too long
				err = s.CreateTokenWithin(ctx, newToken(fmt.Sprintf("tok_%02d", i), "ada"), 5, now)
			}
			if err != nil && !errors.Is(err, store.ErrLimit) {
				t.Errorf("CreateTokenWithin: %v", err)
			}
		}()
	}
	wg.Wait()
	if n, err := s.LiveTokens(ctx, "ada", now); err != nil || n != 5 {
		t.Errorf("after 12 at once with a bound of 5: %d live, %v", n, err)
	}
}
