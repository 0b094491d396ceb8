package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/internal/wire"
)

// An output notification is the one message of a call that is sent per line, so progress
// writes it itself, in the bytes go-sdk would write (the SSE event of
// streamableServerConn.Write: jsonrpc2.EncodeMessage of the notification, params encoded by
// encoding/json without HTML escaping and compacted), straight to the call's response. Going
// through the SDK costs a line about 40k instructions more (bench/README.md, CPU a line): the
// params marshalled by reflection, the _meta map sorted, the result compacted again as a
// json.RawMessage, an event built with fmt. Handler never gives the SDK an event store, so its
// events carry no id: neither do these. TestProgressEventAsTheSDK holds the bytes equal.

// progressEventHead is the event's start, up to the params' _meta object's first key.
const progressEventHead = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"_meta\":{"

// appendProgressEvent appends the SSE event of an output notification: data as its message
// (base64, said in _meta, when it is not UTF-8, as wire.Text does), event as its stream,
// progress and the call's token (token: its JSON, tokenJSON).
func appendProgressEvent(b, token []byte, event string, data []byte, progress float64) []byte {
	b = append(b, progressEventHead...)
	text := utf8.Valid(data)
	// encoding/json writes a map's keys sorted: metaEncoding before metaStream.
	if !text {
		b = wire.AppendJSONString(b, []byte(metaEncoding), false)
		b = append(b, `:"base64",`...)
	}
	b = wire.AppendJSONString(b, []byte(metaStream), false)
	b = append(b, ':')
	b = wire.AppendJSONString(b, []byte(event), false)
	b = append(b, `},"progressToken":`...)
	b = append(b, token...)
	if len(data) > 0 { // message is omitempty
		b = append(b, `,"message":`...)
		if text {
			b = wire.AppendJSONString(b, data, false)
		} else {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, data)
			b = append(b, '"')
		}
	}
	b = append(b, `,"progress":`...)
	b = appendJSONFloat(b, progress)
	return append(b, "}}\n\n"...)
}

// appendJSONFloat appends f as encoding/json writes a float64 (its floatEncoder): no exponent
// between 1e-6 and 1e21, and e-07 written e-7.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// tokenJSON is a progress token as the SDK encodes it (encoding/json, no HTML escaping), or
// false when it cannot be.
func tokenJSON(token any) ([]byte, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(token); err != nil {
		return nil, false
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), true
}
