package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
)

// defaultURL is where `make run` listens.
const defaultURL = "http://127.0.0.1:8080"

// profile is the config file `hangar login` writes: where hangar is and the token to use.
type profile struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// configPath is $XDG_CONFIG_HOME/hangar/config.json, or ~/.config/hangar/config.json.
func (a *app) configPath() (string, error) {
	dir := a.cfg.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := a.cfg.Getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("find the config folder: set XDG_CONFIG_HOME or HOME: %w", err)
			}
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hangar", "config.json"), nil
}

// readProfile reads the config file; a missing one is an empty profile.
func (a *app) readProfile() (profile, string, error) {
	path, err := a.configPath()
	if err != nil {
		return profile{}, "", err
	}
	var p profile
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, path, nil
	}
	if err != nil {
		return p, path, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, path, fmt.Errorf("%s is not a hangar config file (%v): run hangar login again", path, err)
	}
	return p, path, nil
}

// writeProfile writes p to the config file, readable by its owner only (it holds a token).
func writeProfile(path string, p profile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("make %s: %w", filepath.Dir(path), err)
	}
	b, _ := json.MarshalIndent(p, "", "  ")
	if err := renameio.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// client is a REST client for the hangar HANGAR_URL and HANGAR_TOKEN name, each falling back to
// the config file (and the URL to make run's).
func (a *app) client() (*client, error) {
	p, _, err := a.readProfile()
	if err != nil {
		return nil, err
	}
	if v := a.cfg.Getenv("HANGAR_URL"); v != "" {
		p.URL = v
	}
	if v := a.cfg.Getenv("HANGAR_TOKEN"); v != "" {
		p.Token = v
	}
	if p.URL == "" {
		p.URL = defaultURL
	}
	if p.Token == "" {
		return nil, errors.New("no token: run hangar login (or set HANGAR_TOKEN)")
	}
	return newClient(strings.TrimRight(p.URL, "/"), p.Token), nil
}
