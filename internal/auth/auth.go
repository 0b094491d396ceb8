package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/ids"
	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/problem"
	"github.com/hangar-dev/hangar/internal/store"
)

// TokenPrefix starts every token hangar makes, so a leaked one is easy to recognise (and to
// search for in logs and repositories).
const TokenPrefix = "hgr_"

// secretBytes is how much randomness a token carries.
const secretBytes = 32

// AdminUser is the user the first admin token belongs to.
const AdminUser = "admin"

// Config configures an Authenticator.
type Config struct {
	// Store keeps the tokens. Required.
	Store store.Store
	// TokensFile lists static tokens (see parseStaticTokens). Default "": none.
	TokensFile string
	// MaxPerUser bounds what one user holds that can act (HANGAR_TOKENS_MAX_PER_USER): tokens
	// neither revoked nor expired, and OAuth grants that can still issue an access token (each
	// counts once, however often it was refreshed; its access tokens do not count). A token or
	// a grant past it is refused with a *TokenLimitError. Static tokens are not counted.
	// Default 100.
	MaxPerUser int
	// Clock tells token expiry and stamps what is stored. Default the real clock.
	Clock quartz.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Authenticator checks, makes, lists and revokes tokens.
type Authenticator struct {
	store      store.Store
	static     *staticTokens
	maxPerUser int
	clock      quartz.Clock
	log        *slog.Logger
}

// TokenLimitError refuses a token, or an OAuth grant, to a user who holds Config.MaxPerUser
// live tokens and grants already. Waiting does not help: one must be revoked first.
type TokenLimitError struct {
	User string
	Max  int
}

func (e *TokenLimitError) Error() string {
	return fmt.Sprintf("user %s already holds %d live tokens and OAuth grants, the most one user may (HANGAR_TOKENS_MAX_PER_USER); "+
		"revoke one no longer needed (DELETE /api/tokens/{id}, DELETE /api/oauth/grants/{id}) and try again", e.User, e.Max)
}

// Problem is a conflict, not a limit (409, not 429): waiting frees nothing, revoking does.
func (e *TokenLimitError) Problem(err error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeConflict, Message: problem.Sentence(err.Error())}
}

// LimitFor is the error CreateToken gives for user's store.ErrLimit; the OAuth server gives it
// for a grant refused by the same bound (MaxPerUser).
func (a *Authenticator) LimitFor(user string) error {
	return &TokenLimitError{User: user, Max: a.maxPerUser}
}

// MaxPerUser is Config.MaxPerUser, for the OAuth server's grants.
func (a *Authenticator) MaxPerUser() int { return a.maxPerUser }

// New reads the tokens file, if any, and returns an Authenticator. Users named in the file are
// created in the store.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	if cfg.Clock == nil {
		cfg.Clock = quartz.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPerUser <= 0 {
		cfg.MaxPerUser = 100
	}
	st, err := loadStaticTokens(cfg.TokensFile)
	if err != nil {
		return nil, err
	}
	for _, p := range st.byHash {
		if _, err := cfg.Store.EnsureUser(ctx, p.User); err != nil {
			return nil, err
		}
	}
	return &Authenticator{store: cfg.Store, static: st, maxPerUser: cfg.MaxPerUser, clock: cfg.Clock, log: cfg.Logger}, nil
}

// HashSecret is how a token's secret is kept: hex SHA-256 (store.Token.Hash).
func HashSecret(secret string) string { return hashSecret(secret) }

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand's documented contract)
	return TokenPrefix + lowerBase32.EncodeToString(b)
}

func newTokenID() string { return ids.Hex("tok_", 16) }

// Authenticate returns the principal of a bearer token's secret.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrNoToken
	}
	now := a.clock.Now()
	h := hashSecret(secret)
	if p, ok, err := a.static.lookup(h, now); ok {
		return p, nil
	} else if err != nil {
		a.log.Error("tokens file", "err", err)
	}
	t, err := a.store.TokenByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnknownToken
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up token: %w", err)
	}
	if err := usable(t, now); err != nil {
		return Principal{}, err
	}
	if err := a.makerUsable(ctx, t); err != nil {
		return Principal{}, err
	}
	return principal(t), nil
}

// makerUsable is nil unless t is a Fleet page's token (PageToken) whose maker is no longer
// valid (ErrRevoked): a page is signed in only as long as the token that signed it in, static
// ones included (whose line may leave the tokens file).
func (a *Authenticator) makerUsable(ctx context.Context, t store.Token) error {
	if t.Description != pageTokenDescription || t.CreatedBy == "" {
		return nil
	}
	if _, err := a.Principal(ctx, t.CreatedBy); err != nil {
		if errors.Is(err, ErrExpired) || errors.Is(err, ErrUnknownToken) || errors.Is(err, ErrRevoked) {
			return ErrRevoked
		}
		return err
	}
	return nil
}

func usable(t store.Token, now time.Time) error {
	if !t.RevokedAt.IsZero() {
		return ErrRevoked
	}
	if !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) {
		return ErrExpired
	}
	return nil
}

func principal(t store.Token) Principal {
	p := Principal{TokenID: t.ID, User: t.User, Sandbox: t.Sandbox, ExpiresAt: t.ExpiresAt, Audience: t.Audience, Grant: t.Grant,
		Page: t.Description == pageTokenDescription && t.CreatedBy != ""}
	for _, s := range t.Scopes {
		p.Scopes = append(p.Scopes, Scope(s))
	}
	return p
}

// Check reports whether p's token is still valid: nil, or ErrRevoked, ErrExpired or
// ErrUnknownToken (a static token whose line was removed). It is one lookup by primary key, cheap
// enough for the stream registry to call for every open stream every few seconds. It is what a
// new request made with p must pass; for what p already opened, see Recheck.
func (a *Authenticator) Check(ctx context.Context, p Principal) error {
	_, err := a.check(ctx, p)
	return err
}

// Recheck is Check for what p already opened (streams, MCP sessions), never for a new request.
// An OAuth access token's expiry bounds the requests made with it, not what it opened: its
// client refreshes it every hour or so and carries on in the same MCP session and streams, so
// once it has expired Recheck asks its grant instead (checkGrant). Revoking the token or the
// grant ends them at once.
func (a *Authenticator) Recheck(ctx context.Context, p Principal) error {
	t, err := a.check(ctx, p)
	if errors.Is(err, ErrExpired) && t.Grant != "" {
		return a.checkGrant(ctx, t.Grant)
	}
	return err
}

// check is Check, with the stored token when there is one.
func (a *Authenticator) check(ctx context.Context, p Principal) (store.Token, error) {
	now := a.clock.Now()
	if p.Static {
		if _, ok, err := a.static.byID(p.TokenID, now); !ok {
			if err != nil {
				a.log.Error("tokens file", "err", err)
			}
			return store.Token{}, ErrRevoked
		}
		return store.Token{}, nil
	}
	t, err := a.store.TokenByID(ctx, p.TokenID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Token{}, ErrUnknownToken
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("look up token %s: %w", p.TokenID, err)
	}
	if err := usable(t, a.clock.Now()); err != nil {
		return t, err
	}
	return t, a.makerUsable(ctx, t)
}

// checkGrant reports whether an OAuth grant still stands (else ErrRevoked): not revoked, the
// token the person consented with still valid, and a refresh token left that is neither used
// nor expired (without one the client can never get another access token, so the grant is
// over).
func (a *Authenticator) checkGrant(ctx context.Context, id string) error {
	g, err := a.store.GetOAuthGrant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return ErrUnknownToken
	}
	if err != nil {
		return fmt.Errorf("look up grant %s: %w", id, err)
	}
	if !g.RevokedAt.IsZero() {
		return ErrRevoked
	}
	if _, err := a.Principal(ctx, g.ConsentToken); err != nil {
		if errors.Is(err, ErrExpired) || errors.Is(err, ErrUnknownToken) {
			return ErrRevoked
		}
		return err
	}
	ok, err := a.store.OAuthGrantRefreshable(ctx, id, a.clock.Now())
	if err != nil {
		return err
	}
	if !ok {
		return ErrRevoked
	}
	return nil
}

// Principal returns the principal of the token id if it is still valid (Check's errors
// otherwise): the OAuth server acts again for the person who consented, as long as the token
// they signed in with is valid.
func (a *Authenticator) Principal(ctx context.Context, id string) (Principal, error) {
	now := a.clock.Now()
	if p, ok, err := a.static.byID(id, now); ok {
		return p, nil
	} else if err != nil {
		a.log.Error("tokens file", "err", err)
	}
	t, err := a.store.TokenByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnknownToken
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up token %s: %w", id, err)
	}
	if err := usable(t, now); err != nil {
		return Principal{}, err
	}
	return principal(t), nil
}

// NewToken is a request to make a token.
type NewToken struct {
	User        string    // "": the creator's own user
	Scopes      []Scope   // required
	Sandbox     string    // "": unbound (or the creator's binding)
	ExpiresAt   time.Time // zero: never (or the creator's expiry)
	Description string
	Audience    string // "": any resource; else the one resource it is for (OAuth access tokens)
}

// Created is a token just made: the only time its secret is seen.
type Created struct {
	Secret string
	Token  TokenInfo
}

// TokenInfo is what a token list shows: everything but the secret.
type TokenInfo struct {
	ID          string
	User        string
	Hint        string
	Description string
	Scopes      []Scope
	Sandbox     string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Static      bool
}

var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// CheckUserName reports whether name can name a user.
func CheckUserName(name string) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("user name %.70q must be 1 to 64 of letters, digits, '.', '_', '@' and '-', starting with a letter or digit", name)
	}
	return nil
}

func parseScopes(in []string) ([]Scope, error) {
	if len(in) == 0 {
		return nil, errors.New("at least one scope is needed (admin, user, mcp, jobs)")
	}
	var out []Scope
	for _, s := range in {
		sc := Scope(strings.TrimSpace(s))
		if !validScope(sc) {
			return nil, fmt.Errorf("unknown scope %q (known: admin, user, mcp, jobs)", s)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// ParseScopes checks a list of scope names.
func ParseScopes(in []string) ([]Scope, error) {
	s, err := parseScopes(in)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s, nil
}

// MaxDescription is the longest description a token may have: it is listed with the token.
const MaxDescription = 1000

// CreateToken makes a token for req on behalf of by. An admin may make any token, for any
// user. A user-scoped token may make tokens for its own user that are no wider than itself: a
// subset of its scopes, bound to its sandbox if it is bound, expiring no later than it does.
// A token bound to a sandbox belongs to that sandbox's owner (see bind).
func (a *Authenticator) CreateToken(ctx context.Context, by Principal, req NewToken) (Created, error) {
	if req.Description == pageTokenDescription {
		return Created{}, fmt.Errorf("%w: the description %q is hangar's for the Fleet page's tokens; give another", ErrInvalid, req.Description)
	}
	return a.create(ctx, by, req)
}

// create is CreateToken past the check of the description, which PageToken's tokens take.
func (a *Authenticator) create(ctx context.Context, by Principal, req NewToken) (Created, error) {
	c, t, err := a.PrepareToken(ctx, by, req)
	if err != nil {
		return Created{}, err
	}
	if err := a.store.CreateTokenWithin(ctx, t, a.maxPerUser, a.clock.Now()); errors.Is(err, store.ErrLimit) {
		return Created{}, a.LimitFor(t.User)
	} else if err != nil {
		return Created{}, fmt.Errorf("store token: %w", err)
	}
	// Its maker may have been revoked while this request ran, after the revocation listed the
	// tokens it made: a token of a revoked token must not stand.
	if by.TokenID != "" && !by.Static {
		if err := a.Check(ctx, by); err != nil {
			if rerr := a.store.RevokeToken(ctx, t.ID, a.clock.Now()); rerr != nil {
				return Created{}, fmt.Errorf("revoke token %s, whose maker is no longer valid: %w", t.ID, rerr)
			}
			return Created{}, err
		}
	}
	return c, nil
}

// PrepareToken checks req as CreateToken does and makes the token, but leaves storing it to
// the caller (the OAuth server stores it with its grant in one transaction).
func (a *Authenticator) PrepareToken(ctx context.Context, by Principal, req NewToken) (Created, store.Token, error) {
	if !by.IsAdmin() && !by.Has(ScopeUser) {
		return Created{}, store.Token{}, refuse("Making tokens needs a token with the user or admin scope; this one has %s.", scopeList(by.Scopes))
	}
	// A page's token lives in a browser, and is revoked with the token that signed the page in:
	// a token it made would outlive that.
	if by.Page {
		return Created{}, store.Token{}, refuse("A Fleet page's token cannot make tokens; make them with your own token (hangar tokens create).")
	}
	if req.User != "" {
		if err := CheckUserName(req.User); err != nil {
			return Created{}, store.Token{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	if len(req.Description) > MaxDescription || !utf8.ValidString(req.Description) || strings.ContainsRune(req.Description, 0) {
		return Created{}, store.Token{}, fmt.Errorf("%w: a description is text of at most %d bytes", ErrInvalid, MaxDescription)
	}
	scopes := make([]string, 0, len(req.Scopes))
	for _, s := range req.Scopes {
		scopes = append(scopes, string(s))
	}
	if _, err := ParseScopes(scopes); err != nil {
		return Created{}, store.Token{}, err
	}
	now := a.clock.Now().Truncate(time.Millisecond) // what the store keeps
	req.ExpiresAt = req.ExpiresAt.Truncate(time.Millisecond)
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(now) {
		return Created{}, store.Token{}, fmt.Errorf("%w: the expiry %s has already passed", ErrInvalid, req.ExpiresAt.Format(time.RFC3339))
	}
	if !by.IsAdmin() {
		if err := narrower(by, &req); err != nil {
			return Created{}, store.Token{}, err
		}
	}
	if err := a.bind(ctx, by, &req); err != nil {
		return Created{}, store.Token{}, err
	}
	if req.User == "" {
		req.User = by.User
	}
	if _, err := a.store.EnsureUser(ctx, req.User); err != nil {
		return Created{}, store.Token{}, err
	}
	secret := newSecret()
	t := store.Token{
		ID: newTokenID(), User: req.User, Hash: hashSecret(secret), Hint: secret[:len(TokenPrefix)+4],
		Description: req.Description, Scopes: scopes, Sandbox: req.Sandbox, CreatedBy: by.TokenID,
		CreatedAt: now, ExpiresAt: req.ExpiresAt, Audience: req.Audience,
	}
	return Created{Secret: secret, Token: info(t)}, t, nil
}

// PageTokenTTL is the longest a page token lives (PageToken): a working day. It never outlives
// the token it was made from.
const PageTokenTTL = 8 * time.Hour

// pageTokenDescription marks the tokens PageToken makes, which are revoked with their maker.
const pageTokenDescription = "the Fleet page, signed in by hangar fleet --web"

// PageToken makes the Fleet page a token of its own from the token id (hangar fleet --web's,
// whose one-time sign-in ticket the page redeemed), if that one is still valid: of its user,
// with the user scope only (what the page uses: never admin, never another scope), bound to
// its sandbox if it is bound, expiring within PageTokenTTL and no later than it. The page's
// token is listed with the others and revoked with the token that made it (revoke).
func (a *Authenticator) PageToken(ctx context.Context, id string) (Created, error) {
	by, err := a.Principal(ctx, id)
	if err != nil {
		return Created{}, err
	}
	if !by.Has(ScopeUser) {
		return Created{}, refuse("Signing the Fleet page in needs a token with the user scope; this one has %s.", scopeList(by.Scopes))
	}
	expires := a.clock.Now().Add(PageTokenTTL)
	if !by.ExpiresAt.IsZero() && by.ExpiresAt.Before(expires) {
		expires = by.ExpiresAt
	}
	if by.Page {
		return Created{}, refuse("A Fleet page's token cannot sign another page in; run hangar fleet --web with your own token.")
	}
	return a.create(ctx, by, NewToken{Scopes: []Scope{ScopeUser}, Sandbox: by.Sandbox, ExpiresAt: expires, Description: pageTokenDescription})
}

// narrower holds a token made by a non-admin to its maker's user, scopes, binding and expiry,
// filling in the binding and expiry it inherits.
func narrower(by Principal, req *NewToken) error {
	if req.User != "" && req.User != by.User {
		return refuse("Only an admin can make tokens for another user (%s); leave the user out to make one for yourself.", req.User)
	}
	for _, s := range req.Scopes {
		if !slices.Contains(by.Scopes, s) {
			return widerScope(by, s)
		}
	}
	if by.Sandbox != "" {
		if req.Sandbox == "" {
			req.Sandbox = by.Sandbox
		} else if req.Sandbox != by.Sandbox {
			return refuse("This token is bound to sandbox %s and can make only tokens bound to it.", by.Sandbox)
		}
	}
	if !by.ExpiresAt.IsZero() {
		if req.ExpiresAt.IsZero() {
			req.ExpiresAt = by.ExpiresAt
		} else if req.ExpiresAt.After(by.ExpiresAt) {
			return refuse("A new token may not outlive the token making it, which expires %s; ask for an earlier expiry, or ask an admin.", by.ExpiresAt.Format(time.RFC3339))
		}
	}
	return nil
}

// widerScope refuses a token with scope s, which its maker by lacks, saying who may make one.
func widerScope(by Principal, s Scope) error {
	if s == ScopeAdmin {
		return refuse("Only an admin can make a token with the admin scope; your token can make tokens with its own scopes (%s).", scopeList(by.Scopes))
	}
	return refuse("Your token lacks the %s scope, so it cannot make a token with it: it can make tokens with its own scopes (%s), and an admin can make one with %s.", s, scopeList(by.Scopes), s)
}

// scopeList is scopes as a person reads them: "user, mcp".
func scopeList(scopes []Scope) string {
	names := make([]string, 0, len(scopes))
	for _, s := range scopes {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// refusal is a token request that ErrForbidden refuses, with the sentence a client sees: why,
// and what the caller may do instead.
type refusal struct{ sentence string }

func (r *refusal) Error() string { return r.sentence }

// Problem is the refusal's sentence, which says all the detail would.
func (r *refusal) Problem(error) *problem.Problem {
	return &problem.Problem{Code: problem.CodeForbidden, Message: r.sentence}
}

// refuse is ErrForbidden saying the sentence format makes.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrForbidden, &refusal{fmt.Sprintf(format, args...)})
}

// stateDestroyed is provider.StateDestroyed as the store keeps it (auth does not import the
// provider package, which sits beside it).
const stateDestroyed = "destroyed"

// bind checks a binding to a sandbox: the sandbox must exist (not destroyed) and the token must
// belong to its owner, so that a bound token only ever reaches a sandbox of its own user (the
// sandbox package checks that again on every request, since a name can change hands). A user
// may bind only to a sandbox of their own; any other name, existing or not, is ErrNoSandbox. An
// admin binding a token to a user's sandbox makes it that user's (req.User, when empty, becomes
// the owner; naming another user is refused), and a bound token never carries the admin scope.
func (a *Authenticator) bind(ctx context.Context, by Principal, req *NewToken) error {
	if req.Sandbox == "" {
		return nil
	}
	if err := names.CheckSandbox(req.Sandbox); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if slices.Contains(req.Scopes, ScopeAdmin) {
		return fmt.Errorf("%w: a token bound to a sandbox cannot have the admin scope", ErrInvalid)
	}
	sb, err := a.store.GetSandbox(ctx, req.Sandbox)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("look up sandbox %s: %w", req.Sandbox, err)
	}
	if err != nil || sb.State == stateDestroyed || (!by.IsAdmin() && sb.Owner != by.User) {
		return fmt.Errorf("%w: %s (a token can only be bound to an existing sandbox of its own user)", ErrNoSandbox, req.Sandbox)
	}
	switch {
	case req.User == "":
		req.User = sb.Owner
	case req.User != sb.Owner:
		return fmt.Errorf("%w: sandbox %s belongs to %s, so a token bound to it must be %s's, not %s's", ErrInvalid, sb.Name, sb.Owner, sb.Owner, req.User)
	}
	return nil
}

func info(t store.Token) TokenInfo {
	p := principal(t)
	return TokenInfo{ID: t.ID, User: t.User, Hint: t.Hint + "…", Description: t.Description, Scopes: p.Scopes,
		Sandbox: t.Sandbox, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}

func staticInfo(p Principal) TokenInfo {
	return TokenInfo{ID: p.TokenID, User: p.User, Description: "from the tokens file", Scopes: p.Scopes, Sandbox: p.Sandbox, Static: true}
}

// visibleToken reports whether by may see (and revoke) a token of user bound to sandbox: an
// admin any, a user-scoped token its user's, and a token bound to a sandbox only its user's
// tokens bound to that same sandbox.
func visibleToken(by Principal, user, sandbox string) bool {
	switch {
	case by.IsAdmin(): // never a bound token
		return true
	case !by.Has(ScopeUser) || user != by.User:
		return false
	case by.Sandbox != "":
		return sandbox == by.Sandbox
	}
	return true
}

// ListTokens lists the tokens by may see (visibleToken). Never a secret.
func (a *Authenticator) ListTokens(ctx context.Context, by Principal) ([]TokenInfo, error) {
	if !by.IsAdmin() && !by.Has(ScopeUser) {
		return nil, refuse("Listing tokens needs a token with the user or admin scope; this one has %s.", scopeList(by.Scopes))
	}
	user := by.User
	if by.IsAdmin() {
		user = ""
	}
	ts, err := a.store.ListTokens(ctx, user)
	if err != nil {
		return nil, err
	}
	out := make([]TokenInfo, 0, len(ts))
	for _, t := range ts {
		if (!t.ExpiresAt.IsZero() && !a.clock.Now().Before(t.ExpiresAt)) || !visibleToken(by, t.User, t.Sandbox) {
			continue
		}
		out = append(out, info(t))
	}
	for _, p := range a.static.all(a.clock.Now()) {
		if visibleToken(by, p.User, p.Sandbox) {
			out = append(out, staticInfo(p))
		}
	}
	return out, nil
}

// RevokeToken revokes the token id, which must be by's own (its user's) or by must be an admin,
// the OAuth grants the token consented to (a grant acts through the token the person signed
// in with) and, for a token bound to a sandbox, the tokens it made: it returns the ids of the
// tokens revoked with it (see revoke). The tokens are
// refused from the next request on, and the streams they hold end at the next recheck (or at
// once, if the caller ends them: stream.Registry.EndToken).
func (a *Authenticator) RevokeToken(ctx context.Context, by Principal, id string) ([]string, error) {
	if p, ok, _ := a.static.byID(id, a.clock.Now()); ok && visibleToken(by, p.User, p.Sandbox) {
		return nil, fmt.Errorf("%w: %s comes from the tokens file; remove its line there to revoke it", ErrStatic, id)
	}
	if !by.IsAdmin() && !by.Has(ScopeUser) {
		return nil, refuse("Revoking tokens needs a token with the user or admin scope; this one has %s.", scopeList(by.Scopes))
	}
	t, err := a.store.TokenByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !t.RevokedAt.IsZero()) || (err == nil && !visibleToken(by, t.User, t.Sandbox)) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	ended, err := a.revoke(ctx, t)
	if errors.Is(err, store.ErrNotFound) {
		return ended, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return ended, err
}

// revoke revokes t and what it leaves behind: the OAuth grants it consented to (first: if that
// fails, t still stands and the call can be repeated), the Fleet pages it signed in
// (PageToken) and, when t is bound to a sandbox, the tokens it made (bound to that sandbox too)
// and theirs, so revoking an agent's token cuts off
// the copies the agent made of it. Those are listed once t is revoked: a token t makes after
// that is revoked by CreateToken, which checks its maker once it is stored. It returns the ids
// of the other tokens it revoked, whose streams are to end now.
func (a *Authenticator) revoke(ctx context.Context, t store.Token) ([]string, error) {
	ended, err := a.revokeConsented(ctx, t)
	if err != nil {
		return ended, err
	}
	if err := a.store.RevokeToken(ctx, t.ID, a.clock.Now()); err != nil {
		return ended, err
	}
	made, err := a.store.ListTokens(ctx, t.User)
	if err != nil {
		return ended, fmt.Errorf("list the tokens %s made: %w", t.ID, err)
	}
	for _, c := range made {
		// A bound token's every token; an unbound one's Fleet pages (PageToken): a person may
		// make tokens to outlive the one they made them with, never a page's.
		if c.CreatedBy != t.ID || !c.RevokedAt.IsZero() || (t.Sandbox == "" && c.Description != pageTokenDescription) {
			continue
		}
		ids, err := a.revoke(ctx, c)
		ended = append(ended, ids...)
		if err != nil && !errors.Is(err, store.ErrNotFound) { // ErrNotFound: revoked meanwhile
			return ended, err
		}
		ended = append(ended, c.ID)
	}
	return ended, nil
}

// revokeConsented revokes the OAuth grants not yet revoked that t consented to, and returns the
// ids of the access tokens it revoked with them.
func (a *Authenticator) revokeConsented(ctx context.Context, t store.Token) ([]string, error) {
	user := t.User
	if slices.Contains(t.Scopes, string(ScopeAdmin)) {
		user = "" // an admin's consent may make a grant of another user (a sandbox's owner)
	}
	gs, err := a.store.ListOAuthGrants(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("list the grants of token %s: %w", t.ID, err)
	}
	var ended []string
	for _, g := range gs {
		if g.ConsentToken != t.ID {
			continue
		}
		ids, err := a.store.RevokeOAuthGrant(ctx, g.ID, a.clock.Now())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return ended, fmt.Errorf("revoke grant %s: %w", g.ID, err)
		}
		ended = append(ended, ids...)
	}
	return ended, nil
}

// NeedsBootstrap says whether Bootstrap would make the first admin token: the tokens file names
// no admin and the store never had a token.
func (a *Authenticator) NeedsBootstrap(ctx context.Context) (bool, error) {
	for _, p := range a.static.all(a.clock.Now()) {
		if p.IsAdmin() {
			return false, nil
		}
	}
	n, err := a.store.CountTokens(ctx)
	return err == nil && n == 0, err
}

// Bootstrap makes the first admin token when the store has never held one and the tokens file
// names no admin (the operator has one already), and returns its secret; created is false (and
// the secret empty) otherwise.
func (a *Authenticator) Bootstrap(ctx context.Context) (secret string, created bool, err error) {
	if needed, err := a.NeedsBootstrap(ctx); err != nil || !needed {
		return "", false, err
	}
	c, err := a.CreateToken(ctx, Principal{User: AdminUser, Scopes: []Scope{ScopeAdmin}},
		NewToken{User: AdminUser, Scopes: []Scope{ScopeAdmin}, Description: "the first admin token, made at first start"})
	if err != nil {
		return "", false, err
	}
	return c.Secret, true, nil
}
