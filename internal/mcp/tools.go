package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool is mcp.AddTool with the tool's input schema, inferred from In as go-sdk infers it,
// given to go-sdk as JSON (a json.RawMessage) instead of a *jsonschema.Schema. For protocol
// 2026-07-28 and later, go-sdk checks every tools/call's Mcp-Param headers against the tool's
// x-mcp-header annotations, which it reads by marshalling the tool's input schema again. A
// *jsonschema.Schema marshals through reflection, property by property: about a third of an
// exec call's fixed cost (5.97M instructions a call, 4.11M with the schema as JSON;
// bench/README.md, cpu). JSON is only checked and copied. go-sdk still validates the
// arguments against the same schema (it resolves it once, here), and tools/list shows the
// same bytes.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if t.InputSchema == nil {
		schema, err := jsonschema.For[In](&jsonschema.ForOptions{})
		if err != nil {
			panic(fmt.Sprintf("tool %s: infer its input schema: %v", t.Name, err))
		}
		raw, err := json.Marshal(schema)
		if err != nil {
			panic(fmt.Sprintf("tool %s: marshal its input schema: %v", t.Name, err))
		}
		t.InputSchema = json.RawMessage(raw)
	}
	mcp.AddTool(s, t, h)
}
