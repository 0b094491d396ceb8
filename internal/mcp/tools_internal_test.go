package mcp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsGoThroughAddTool: every tool is registered with addTool, never with go-sdk's
// mcp.AddTool directly, whose *jsonschema.Schema go-sdk marshals again on each tools/call of
// protocol 2026-07-28 and later (addTool says why and what it cost).
func TestToolsGoThroughAddTool(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "tools.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if ok && sel.Sel.Name == "AddTool" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "mcp" {
					t.Errorf("%s: a tool registered with mcp.AddTool; use addTool", fset.Position(sel.Pos()))
				}
			}
			return true
		})
	}
}
