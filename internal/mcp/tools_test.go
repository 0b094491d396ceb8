package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolSchemas: every tool lists an object schema with its properties and required
// arguments (the schemas are handed to go-sdk as JSON, see addTool), and go-sdk still holds
// each call to it, in both eras: a missing or mistyped argument is a tool error that names it.
func TestToolSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.sandbox(t, staticSecret, "box", "")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			c := e.connect(t, staticSecret, era)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			res, err := c.session.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == "exec" }) {
				t.Fatalf("exec is not among the %d tools listed", len(res.Tools))
			}
			for _, tool := range res.Tools {
				raw, _ := json.Marshal(tool.InputSchema)
				var s struct {
					Type       string                     `json:"type"`
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
					t.Errorf("tool %s: input schema %s, want an object with properties", tool.Name, raw)
				}
				if tool.Name == "exec" {
					if !slices.Contains(s.Required, "command") || !strings.Contains(string(s.Properties["command"]), "bash -lc") {
						t.Errorf("exec's schema %s lacks its required command and its description", raw)
					}
				}
			}
			for _, tc := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"sandbox": "box"}, "command"},
				{map[string]any{"sandbox": "box", "command": "true", "timeout": "soon"}, "timeout"},
			} {
				if got := errorText(t, c.start(tc.args, false).wait(t)); !strings.Contains(got, tc.want) || !strings.Contains(got, "validating") {
					t.Errorf("exec %v: tool error %q, want go-sdk's validation naming %s", tc.args, got, tc.want)
				}
			}
		})
	}
}
