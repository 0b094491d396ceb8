package mcp

import (
	"context"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SDKProgress counts the progress notifications h's SDK sends from now on: those hangar does
// not write to the response itself (progresswire.go).
func SDKProgress(h *Handler) *atomic.Int64 {
	var n atomic.Int64
	h.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/progress" {
				n.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return &n
}
