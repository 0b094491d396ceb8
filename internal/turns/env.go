package turns

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hangar-dev/hangar/internal/seal"
	"github.com/hangar-dev/hangar/internal/store"
)

// EnvPurpose is the HKDF purpose of the key that seals sessions' env (Config.EnvSeal).
const EnvPurpose = "hangar sessions env v1"

// envContext binds a sealed env value to its session and name: a value copied into another
// session's row, or under another name, does not open.
func envContext(sessionID, name string) string { return sessionID + "\x00" + name }

// sealEnv returns env with every value sealed for the session id; with no Config.EnvSeal, env
// as it is.
func (s *Service) sealEnv(id string, env map[string]string) map[string]string {
	if s.cfg.EnvSeal == nil || len(env) == 0 {
		return env
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = s.cfg.EnvSeal.Seal(v, envContext(id, k))
	}
	return out
}

// openEnv returns se's env in the clear, for the harness's launch and nothing else. Values kept
// before hangar sealed them are taken as they are. A value that does not open is an error that
// says why: never a sealed string handed to the agent as its API key.
func (s *Service) openEnv(se store.Session) (map[string]string, error) {
	out := make(map[string]string, len(se.Env))
	for _, k := range slices.Sorted(maps.Keys(se.Env)) {
		v := se.Env[k]
		if s.cfg.EnvSeal == nil {
			if seal.Sealed(v) {
				return nil, fmt.Errorf("the session's env %s is sealed, and this hangar has no key to open it", k)
			}
			out[k] = v
			continue
		}
		plain, _, err := s.cfg.EnvSeal.Open(v, envContext(se.ID, k))
		if errors.Is(err, seal.ErrWrongKey) {
			return nil, fmt.Errorf("the session's env %s does not open with this hangar's key: it was stored by a hangar with another HANGAR_SECRET "+
				"(or another <data dir>/secret); give every replica the same secret, or make the session again with its env", k)
		}
		if err != nil {
			return nil, fmt.Errorf("open the session's env %s: %w", k, err)
		}
		out[k] = plain
	}
	return out, nil
}

// SealStoredEnv seals the env values that a hangar from before sealing kept in the clear, and
// says how many sessions it rewrote. Run at start; values are also read in both forms, so a
// session it has not reached yet still runs. Without Config.EnvSeal it does nothing.
func (s *Service) SealStoredEnv(ctx context.Context) (int, error) {
	if s.cfg.EnvSeal == nil {
		return 0, nil
	}
	ses, err := s.cfg.Store.ListSessions(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("seal stored env: %w", err)
	}
	n := 0
	for _, se := range ses {
		plain := map[string]string{}
		for k, v := range se.Env {
			if !seal.Sealed(v) {
				plain[k] = v
			}
		}
		if len(plain) == 0 {
			continue
		}
		env := maps.Clone(se.Env)
		maps.Copy(env, s.sealEnv(se.ID, plain))
		if err := s.cfg.Store.SetSessionEnv(ctx, se.ID, env); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, fmt.Errorf("seal the env of session %s: %w", se.ID, err)
		}
		n++
	}
	return n, nil
}
