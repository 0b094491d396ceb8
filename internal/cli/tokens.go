package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

type tokenJSON struct {
	ID          string   `json:"id"`
	Token       string   `json:"token"`
	User        string   `json:"user"`
	Hint        string   `json:"hint"`
	Description string   `json:"description"`
	Scopes      []string `json:"scopes"`
	Sandbox     string   `json:"sandbox"`
	ExpiresAt   *string  `json:"expires_at"`
	Static      bool     `json:"static"`
}

func (a *app) tokensCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "make, list and revoke tokens",
	})
	a.outputFlag(cmd)
	cmd.AddCommand(a.tokensCreateCmd(), a.tokensLsCmd(), a.tokensRevokeCmd())
	return cmd
}

func (a *app) tokensCreateCmd() *cobra.Command {
	var req struct {
		User        string   `json:"user,omitempty"`
		Scopes      []string `json:"scopes"`
		Sandbox     string   `json:"sandbox,omitempty"`
		Description string   `json:"description,omitempty"`
		ExpiresIn   string   `json:"expires_in,omitempty"`
	}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "make a token; its secret is shown once",
		Long: `create makes a token and prints its secret, once: hangar keeps only its hash. With -o json
the whole answer is printed, the secret in "token".`,
		Example: "  hangar tokens create --user ada --scopes user,mcp --expires-in 24h",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return printAnswer(cmd.Context(), a, "POST", "/api/tokens", req, func(tok tokenJSON) {
				fmt.Fprintln(a.cfg.Stdout, tok.Token)
				fmt.Fprintf(a.cfg.Stderr, "Token %s for %s (%s). Its secret, above, is shown only this once.\n", tok.ID, tok.User, strings.Join(tok.Scopes, ", "))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.User, "user", "", "whose token (default: yours)")
	f.StringSliceVar(&req.Scopes, "scopes", []string{"user"}, "admin, user, mcp, jobs (comma-separated)")
	f.StringVar(&req.Sandbox, "sandbox", "", "bind it to this sandbox")
	f.StringVar(&req.Description, "description", "", "what it is for")
	f.StringVar(&req.ExpiresIn, "expires-in", "", "how long it lasts: 24h, 30m (default: for ever)")
	return cmd
}

func (a *app) tokensLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "list your tokens (an admin's: everyone's), never their secrets",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			header := []string{"ID", "USER", "SCOPES", "SANDBOX", "EXPIRES", "HINT", "DESCRIPTION"}
			return printList(cmd.Context(), a, "/api/tokens", "tokens", header, func(tok tokenJSON) []string {
				exp := "never"
				if tok.ExpiresAt != nil {
					exp = *tok.ExpiresAt
				}
				if tok.Static {
					tok.Description = strings.TrimSpace("(static) " + tok.Description)
				}
				return []string{tok.ID, tok.User, strings.Join(tok.Scopes, ","), tok.Sandbox, exp, tok.Hint, oneLine(tok.Description, 40)}
			})
		},
	}
}

func (a *app) tokensRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "revoke a token: refused from the next request on, its streams ended",
		Args:  exactArgs(1, "a token's id (tok_...; hangar tokens ls lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/api/tokens/"+esc(args[0]), nil, nil); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.cfg.Stdout, map[string]any{"id": args[0], "revoked": true})
			}
			fmt.Fprintf(a.cfg.Stdout, "Revoked %s.\n", args[0])
			return nil
		},
	}
}
