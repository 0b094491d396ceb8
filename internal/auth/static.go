package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/names"
)

// minStaticTokenLen is the shortest static token accepted: as many characters as a generated
// token has random bytes, so a static token is no easier to guess than ours.
const minStaticTokenLen = 32

// staticTokens is the tokens file, read at start and again whenever it changes (checked at most
// once a second), so deleting a line revokes that token.
type staticTokens struct {
	path string

	mu       sync.Mutex // guards everything below
	byHash   map[string]Principal
	modTime  time.Time
	size     int64
	lastStat time.Time
}

func loadStaticTokens(path string) (*staticTokens, error) {
	s := &staticTokens{path: path, byHash: map[string]Principal{}}
	if path == "" {
		return s, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens file: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens file: %w", err)
	}
	if s.byHash, err = parseStaticTokens(path, data); err != nil {
		return nil, err
	}
	s.modTime, s.size = fi.ModTime(), fi.Size()
	return s, nil
}

// parseStaticTokens reads lines of `TOKEN USER SCOPES [SANDBOX]`, SCOPES comma-separated; blank
// lines and lines starting with # are skipped.
func parseStaticTokens(path string, data []byte) (map[string]Principal, error) {
	out := map[string]Principal{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 4 {
			return nil, fmt.Errorf("%s line %d: want TOKEN USER SCOPES [SANDBOX], got %d fields", path, n, len(f))
		}
		if len(f[0]) < minStaticTokenLen {
			return nil, fmt.Errorf("%s line %d: the token is %d characters; at least %d are needed", path, n, len(f[0]), minStaticTokenLen)
		}
		if err := CheckUserName(f[1]); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		scopes, err := parseScopes(strings.Split(f[2], ","))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		p := Principal{User: f[1], Scopes: scopes, Static: true}
		if len(f) == 4 {
			if err := names.CheckSandbox(f[3]); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, n, err)
			}
			p.Sandbox = f[3]
		}
		h := hashSecret(f[0])
		p.TokenID = "static-" + h[:12]
		if _, dup := out[h]; dup {
			return nil, fmt.Errorf("%s line %d: the same token is listed twice", path, n)
		}
		out[h] = p
	}
	return out, sc.Err()
}

// lookup returns the static principal for a secret's hash, rereading the file first if it
// changed. A file that became unreadable or invalid keeps the last good set (and says so via
// the returned error, which callers log).
func (s *staticTokens) lookup(hash string, now time.Time) (Principal, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refreshLocked(now)
	p, ok := s.byHash[hash]
	return p, ok, err
}

// byID finds a static principal by its id.
func (s *staticTokens) byID(id string, now time.Time) (Principal, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refreshLocked(now)
	for _, p := range s.byHash {
		if p.TokenID == id {
			return p, true, nil
		}
	}
	return Principal{}, false, err
}

func (s *staticTokens) all(now time.Time) []Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.refreshLocked(now)
	out := make([]Principal, 0, len(s.byHash))
	for _, p := range s.byHash {
		out = append(out, p)
	}
	return out
}

func (s *staticTokens) refreshLocked(now time.Time) error {
	if s.path == "" || now.Sub(s.lastStat) < time.Second {
		return nil
	}
	s.lastStat = now
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("reread tokens file: %w", err)
	}
	if fi.ModTime().Equal(s.modTime) && fi.Size() == s.size {
		return nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("reread tokens file: %w", err)
	}
	m, err := parseStaticTokens(s.path, data)
	if err != nil {
		return fmt.Errorf("reread tokens file (keeping the previous tokens): %w", err)
	}
	s.byHash, s.modTime, s.size = m, fi.ModTime(), fi.Size()
	return nil
}
