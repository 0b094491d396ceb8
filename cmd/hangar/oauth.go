package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/coder/quartz"
	"github.com/hangar-dev/hangar/internal/addrlimit"
	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/oauth"
	"github.com/hangar-dev/hangar/internal/oauthhttp"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/stream"
)

// newOAuth is the OAuth authorization server when HANGAR_PUBLIC_URL is set, else nil, and the
// configuration of its endpoints.
func newOAuth(cfg config.Config, st store.Store, authn *auth.Authenticator, streams *stream.Registry, clock quartz.Clock, log *slog.Logger) (*oauth.Server, oauthhttp.Config, error) {
	if cfg.PublicURL == "" {
		return nil, oauthhttp.Config{}, nil
	}
	var hosts []string
	for _, h := range strings.Split(cfg.OAuth.ClientIDHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	proxies, err := addrlimit.ParsePrefixes(cfg.TrustedProxies) // checked when the setting was parsed
	if err != nil {
		return nil, oauthhttp.Config{}, fmt.Errorf("HANGAR_TRUSTED_PROXIES: %w", err)
	}
	s, err := oauth.New(oauth.Config{Store: st, Auth: authn, Issuer: cfg.PublicURL, ClientIDHosts: hosts, AccessTTL: cfg.OAuth.AccessTokenTTL,
		EndToken: streams.EndToken, Logger: log, Clock: clock})
	if err != nil {
		return nil, oauthhttp.Config{}, err
	}
	log.Info("OAuth for MCP clients", "issuer", cfg.PublicURL, "resource", s.Resource(), "client_id_hosts", hosts)
	return s, oauthhttp.Config{TrustedProxies: proxies,
		RegisterLimit: addrlimit.New(addrlimit.Config{PerMinute: cfg.OAuth.RegisterPerMinute, Clock: clock}),
		ConsentLimit:  addrlimit.New(addrlimit.Config{PerMinute: cfg.OAuth.ConsentPerMinute, Clock: clock})}, nil
}
