package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) whoamiCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "say whether hangar is up and its store answers, and who the token is",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := a.jsonClient()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "GET", "/readyz", nil, nil); err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.do(cmd.Context(), "GET", "/api/whoami", nil, &raw); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.cfg.Stdout, raw)
			}
			var who struct {
				User      string   `json:"user"`
				TokenID   string   `json:"token_id"`
				Scopes    []string `json:"scopes"`
				Sandbox   string   `json:"sandbox"`
				ExpiresAt string   `json:"expires_at"`
			}
			json.Unmarshal(raw, &who)
			fmt.Fprintf(a.cfg.Stdout, "hangar at %s is ready (its store answers).\n", c.base)
			fmt.Fprintf(a.cfg.Stdout, "You are %s, with token %s (%s)", who.User, who.TokenID, strings.Join(who.Scopes, ", "))
			if who.Sandbox != "" {
				fmt.Fprintf(a.cfg.Stdout, ", bound to sandbox %s", who.Sandbox)
			}
			if who.ExpiresAt != "" {
				fmt.Fprintf(a.cfg.Stdout, ", expiring %s", who.ExpiresAt)
			}
			fmt.Fprintln(a.cfg.Stdout, ".")
			return nil
		},
	}
	a.outputFlag(cmd)
	return cmd
}

func (a *app) metricsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "metrics [PREFIX]",
		Short:   "print hangar's Prometheus metrics whose names start with PREFIX (default hangar_)",
		Example: "  hangar metrics hangar_stream",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := "hangar_"
			if len(args) == 1 {
				prefix = args[0]
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			resp, err := c.request(cmd.Context(), "GET", "/metrics", nil, nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), prefix) {
					fmt.Fprintln(a.cfg.Stdout, sc.Text())
				}
			}
			return sc.Err()
		},
	}
}
