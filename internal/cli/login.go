package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *app) loginCmd() *cobra.Command {
	var url, token string
	cmd := &cobra.Command{
		Use:   "login [URL]",
		Short: "check a token with hangar and keep it, with hangar's URL, in the config file",
		Long: `login asks hangar who the token is and, if hangar knows it, writes the URL and the token to
$XDG_CONFIG_HOME/hangar/config.json (or ~/.config/hangar/config.json), readable by you only.
Every other verb reads it; HANGAR_URL and HANGAR_TOKEN override it.

The token comes from --token, HANGAR_TOKEN, or a line of standard input (typed without echo on
a terminal), so it need not be in your shell's history.`,
		Example: `  hangar login http://127.0.0.1:8080 < .hangar/admin-token`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				url = args[0]
			}
			return a.login(cmd.Context(), url, token)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "hangar's URL (default: HANGAR_URL, the config file's, or "+defaultURL+")")
	cmd.Flags().StringVar(&token, "token", "", "the token (default: HANGAR_TOKEN, or a line of standard input)")
	return cmd
}

func (a *app) login(ctx context.Context, url, token string) error {
	p, path, err := a.readProfile()
	if err != nil {
		return err
	}
	switch {
	case url != "":
	case a.cfg.Getenv("HANGAR_URL") != "":
		url = a.cfg.Getenv("HANGAR_URL")
	case p.URL != "":
		url = p.URL
	default:
		url = defaultURL
	}
	if token == "" {
		token = a.cfg.Getenv("HANGAR_TOKEN")
	}
	if token == "" {
		if token, err = a.readToken(); err != nil {
			return err
		}
	}
	url = strings.TrimRight(url, "/")
	c := newClient(url, token)
	var who struct {
		User   string   `json:"user"`
		Scopes []string `json:"scopes"`
	}
	if err := c.do(ctx, "GET", "/api/whoami", nil, &who); err != nil {
		return err
	}
	if err := writeProfile(path, profile{URL: url, Token: token}); err != nil {
		return err
	}
	fmt.Fprintf(a.cfg.Stdout, "Logged in to %s as %s (%s); saved in %s.\n", url, who.User, strings.Join(who.Scopes, ", "), path)
	return nil
}

// readToken reads one line of standard input: without echo, after a prompt, on a terminal.
func (a *app) readToken() (string, error) {
	if f, ok := a.stdinFile(); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.cfg.Stderr, "Token: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.cfg.Stderr)
		if err != nil {
			return "", fmt.Errorf("read the token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := bufio.NewReader(a.cfg.Stdin).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" {
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the token: %w", err)
		}
		return "", usageError{"no token: give it with --token, HANGAR_TOKEN or on standard input"}
	}
	return line, nil
}
