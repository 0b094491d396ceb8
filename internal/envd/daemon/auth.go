package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"

	"connectrpc.com/connect"
)

// authState is what POST /init may change after start-up.
type authState struct {
	mu          sync.Mutex // protects the fields below
	token       string     // empty: tokenHash, if any, else no authentication
	tokenHash   []byte     // the SHA-256 of the token, when the daemon was started with it
	defaultUser string     // empty: the daemon's own user
	workdir     string     // empty: the user's home
	envs        map[string]string
}

// newAuthState is the daemon's start-up state. A malformed cfg.AccessTokenSHA256 (the command
// line checks it first, with ParseTokenSHA256) leaves the daemon accepting no token at all.
func newAuthState(cfg Config) *authState {
	hash, err := ParseTokenSHA256(cfg.AccessTokenSHA256)
	if err != nil {
		hash = []byte{}
	}
	return &authState{token: cfg.AccessToken, tokenHash: hash, defaultUser: cfg.DefaultUser, workdir: cfg.Workdir}
}

// ParseTokenSHA256 reads the hex SHA-256 of an access token ("": none).
func ParseTokenSHA256(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("the access token's SHA-256 must be %d hex digits, got %q", 2*sha256.Size, s)
	}
	return b, nil
}

// settings is a consistent copy of an authState.
type settings struct {
	token, defaultUser, workdir string
	tokenHash                   []byte
	envs                        map[string]string
}

func (a *authState) get() settings {
	a.mu.Lock()
	defer a.mu.Unlock()
	return settings{a.token, a.defaultUser, a.workdir, a.tokenHash, a.envs}
}

// open reports whether requests need no token.
func (s settings) open() bool { return s.token == "" && s.tokenHash == nil }

// accepts reports whether got is the token: the one set, else the one whose hash was given.
func (s settings) accepts(got string) bool {
	if s.token != "" {
		return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
	}
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash) == 1
}

type ctxKey int

const identityKey ctxKey = iota

// identityFrom returns the user a request runs as; authenticate put it in the context.
func identityFrom(ctx context.Context) *identity {
	id, _ := ctx.Value(identityKey).(*identity)
	return id
}

// authenticate checks X-Access-Token (once a token is set) on everything but GET /health, and
// resolves the user the request runs as: the name in `Authorization: Basic base64(user:)`
// (or the username query parameter of /files), else the default user.
func (d *Daemon) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		s := d.auth.get()
		if !s.open() {
			got := r.Header.Get("X-Access-Token")
			if got == "" {
				writeError(w, r, http.StatusUnauthorized, "this daemon needs an access token: send it in the X-Access-Token header")
				return
			}
			if !s.accepts(got) {
				writeError(w, r, http.StatusUnauthorized, "the access token in X-Access-Token is not valid")
				return
			}
		}
		name := s.defaultUser
		if u, _, ok := r.BasicAuth(); ok && u != "" {
			name = u
		}
		if u := r.URL.Query().Get("username"); u != "" && r.URL.Path == "/files" {
			name = u
		}
		id, err := d.users.lookupIdentity(name)
		if err == nil && d.cfg.OwnHome != "" && int(id.uid) == os.Getuid() {
			id.home = d.cfg.OwnHome
		}
		if err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, errNotPermitted) {
				status = http.StatusForbidden
			}
			writeError(w, r, status, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey, id)))
	})
}

// initRequest is the body of POST /init (the fields of envd's that hangar honours).
type initRequest struct {
	AccessToken    *string           `json:"accessToken"`
	EnvVars        map[string]string `json:"envVars"`
	DefaultUser    *string           `json:"defaultUser"`
	DefaultWorkdir *string           `json:"defaultWorkdir"`
}

// handleInit sets the access token, the default user and working directory and extra
// environment variables for processes. Once a token is set, it needs that token like any
// other request.
func (d *Daemon) handleInit(w http.ResponseWriter, r *http.Request) {
	var req initRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, r, http.StatusBadRequest, fmt.Sprintf("the body of /init is not valid JSON: %v", err))
			return
		}
	}
	if req.DefaultUser != nil && *req.DefaultUser != "" {
		if _, err := d.users.lookupIdentity(*req.DefaultUser); err != nil {
			writeError(w, r, http.StatusBadRequest, err.Error())
			return
		}
	}
	if req.DefaultWorkdir != nil && *req.DefaultWorkdir != "" {
		if fi, err := os.Stat(*req.DefaultWorkdir); err != nil || !fi.IsDir() {
			writeError(w, r, http.StatusBadRequest, fmt.Sprintf("defaultWorkdir %q is not a directory", *req.DefaultWorkdir))
			return
		}
	}
	d.auth.mu.Lock()
	if req.AccessToken != nil {
		d.auth.token = *req.AccessToken
	}
	if req.DefaultUser != nil {
		d.auth.defaultUser = *req.DefaultUser
	}
	if req.DefaultWorkdir != nil {
		d.auth.workdir = *req.DefaultWorkdir
	}
	if req.EnvVars != nil {
		d.auth.envs = maps.Clone(req.EnvVars) // replaced, not merged, as envd does
	}
	d.auth.mu.Unlock()
	d.log.Info("envd initialised", "token_set", req.AccessToken != nil && *req.AccessToken != "")
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers an error in the shape the caller expects: a Connect (or gRPC) error for
// RPCs, written by connect-go's ErrorWriter — so a streaming call gets its error, message
// included, in the end of the stream, as connect clients read it — and envd's
// {"message","code"} otherwise.
func writeError(w http.ResponseWriter, r *http.Request, status int, message string) {
	if isRPC(r) {
		code := map[int]connect.Code{
			http.StatusUnauthorized: connect.CodeUnauthenticated,
			http.StatusForbidden:    connect.CodePermissionDenied,
			http.StatusBadRequest:   connect.CodeInvalidArgument,
		}[status]
		if code == 0 {
			code = connect.CodeUnknown
		}
		cerr := connect.NewError(code, errors.New(message))
		if ew := connect.NewErrorWriter(); ew.IsSupported(r) {
			_ = ew.Write(w, r, cerr)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": code.String(), "message": message})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": message, "code": status})
}

func isRPC(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}
