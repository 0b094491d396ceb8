package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/wire"
)

// sdkProgressEvent is the SSE event go-sdk writes for an output notification: the params
// encoded without HTML escaping (jsonrpc2's marshalToRaw), the message by EncodeMessage, the
// event by writeEvent (no id: no event store).
func sdkProgressEvent(t *testing.T, token any, event string, data []byte, progress float64) []byte {
	t.Helper()
	params := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Meta: mcp.Meta{metaStream: event}}
	var enc string
	if params.Message, enc = wire.Text(data); enc != "" {
		params.Meta[metaEncoding] = enc
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(params); err != nil {
		t.Fatal(err)
	}
	msg, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/progress", Params: bytes.TrimRight(buf.Bytes(), "\n")})
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte("event: message\ndata: "), msg...), "\n\n"...)
}

// TestProgressEventAsTheSDK: an output notification progress writes itself is, byte for byte,
// the event go-sdk would have written for it.
func TestProgressEventAsTheSDK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		token    any
		event    string
		data     string
		progress float64
	}{
		{"a line", "tok", "stdout", "L 0001 1733160000.123456\n", 26},
		{"stderr, a number token", float64(7), "stderr", "oops\n", 5},
		{"JSON's escapes", "t", "stdout", "\"quoted\" \\ \t tab \r\n \b \f \x01 \x1f", 1},
		{"HTML is not escaped", "<a&b>", "stdout", "<html> & </html>", 16},
		{"line and paragraph separators", "t", "stdout", "a\u2028b\u2029c", 9},
		{"not UTF-8: base64", "t", "stdout", "\xff\xfe binary", 9},
		{"a character cut", "t", "stdout", "\xe2\x82", 2},
		{"unicode", "t", "stdout", "héllo, 世界 🚀\n", 20},
		{"half a step (the capped notice's)", "t", "stdout", "x", 1234.5},
		{"a large offset", "t", "stdout", "x", 1 << 50},
		{"past 1e21", "t", "stdout", "x", 1e22},
		{"empty", "t", "stdout", "", 0},
		{"an object token", map[string]any{"k": "v<"}, "stdout", "x", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, ok := tokenJSON(tc.token)
			if !ok {
				t.Fatalf("token %v: cannot encode", tc.token)
			}
			got := appendProgressEvent(nil, tok, tc.event, []byte(tc.data), tc.progress)
			if want := sdkProgressEvent(t, tc.token, tc.event, []byte(tc.data), tc.progress); !bytes.Equal(got, want) {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}

// FuzzProgressEvent: any output, token and progress come out as the SDK's bytes.
func FuzzProgressEvent(f *testing.F) {
	f.Add("tok", "L 1\n", 3.0)
	f.Add("<&>", "\xff\u2028\x00", 0.5)
	f.Fuzz(func(t *testing.T, token, data string, progress float64) {
		if progress != progress || progress > 1e300 || progress < -1e300 {
			return // NaN and infinities: no progress is one
		}
		tok, _ := tokenJSON(token)
		got := appendProgressEvent(nil, tok, "stdout", []byte(data), progress)
		if want := sdkProgressEvent(t, token, "stdout", []byte(data), progress); !bytes.Equal(got, want) {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
}
