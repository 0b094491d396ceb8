package e2bapi

import (
	"encoding/binary"
	"encoding/json"
	"io"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hangar-dev/hangar/internal/stream"
)

// passedBody is a streaming call's answer as it passes from the daemon to the client: its
// bytes count on the registry stream, and when the registry ended the stream (the read from
// the daemon then fails) a Connect stream gets an end-of-stream message naming why, if the
// cut fell between two messages; else the answer is cut off (the client sees the connection
// drop). The proxy's one copying goroutine reads it.
type passedBody struct {
	io.ReadCloser
	s       *stream.Stream
	connect bool // enveloped Connect messages: track where each ends
	// first, when set, is given the data of the first message (a Start's start event, which
	// has the pid), once it is whole.
	first func(data []byte, json bool)
	json  bool // the messages are JSON (application/connect+json), else protobuf

	hdr    [5]byte // the header of the message being read, while it is
	hn     int     // bytes of hdr read so far
	left   uint32  // bytes of the current message's data still to come
	msgs   int     // messages begun
	data   []byte  // the first message's data so far, while first waits for it
	endMsg bool    // the daemon sent its own end-of-stream message
	tail   []byte  // hangar's end-of-stream message, being handed out
	ended  bool    // tail was made: the rest of the answer is tail, then EOF
}

// firstMax bounds what of a first message is kept for first: a start event is a few bytes.
const firstMax = 4 << 10

func newPassedBody(rc io.ReadCloser, s *stream.Stream, contentType string, first func(data []byte, json bool)) *passedBody {
	b := &passedBody{ReadCloser: rc, s: s, connect: isConnectStream(contentType), json: contentType == "application/connect+json"}
	if b.connect {
		b.first = first
	}
	return b
}

func (b *passedBody) Read(p []byte) (int, error) {
	if b.ended {
		if len(b.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.s.Passed(n)
		if b.connect {
			b.track(p[:n])
		}
	}
	if err != nil && err != io.EOF && b.connect && b.s.Reason() != "" && b.atBoundary() && !b.endMsg {
		b.ended, b.tail = true, endOfStream(b.s.Reason())
		return n, nil
	}
	return n, err
}

// track follows the envelopes (a flags byte, a 4-byte big-endian length, the data) in what
// passed.
func (b *passedBody) track(p []byte) {
	for len(p) > 0 {
		if b.left > 0 {
			k := min(uint32(len(p)), b.left)
			b.left -= k
			b.keepFirst(p[:k])
			p = p[k:]
			continue
		}
		k := copy(b.hdr[b.hn:], p)
		b.hn += k
		p = p[k:]
		if b.hn == len(b.hdr) {
			b.hn, b.left = 0, binary.BigEndian.Uint32(b.hdr[1:])
			b.msgs++
			if b.hdr[0]&endStreamFlag != 0 {
				b.endMsg = true
			}
			if b.msgs == 1 && (b.hdr[0] != 0 || b.left > firstMax) {
				b.first = nil // compressed, an end, or too large: not a start event
			}
			b.keepFirst(nil)
		}
	}
}

// keepFirst keeps p, data of the current message, while it is the first one and first
// waits for it, and hands it to first once it is whole.
func (b *passedBody) keepFirst(p []byte) {
	if b.first == nil || b.msgs != 1 {
		return
	}
	b.data = append(b.data, p...)
	if b.left == 0 {
		b.first(b.data, b.json)
		b.first, b.data = nil, nil
	}
}

func (b *passedBody) atBoundary() bool { return b.hn == 0 && b.left == 0 }

// endStreamFlag marks a Connect stream's last message, a JSON one whatever the codec.
const endStreamFlag = 0x02

// endOfStream is the Connect end-of-stream message of a stream hangar ended for reason.
func endOfStream(reason stream.Reason) []byte { return endOfStreamError(endedError(reason)) }

// endOfStreamError is a Connect end-of-stream message carrying an error.
func endOfStreamError(code, msg string) []byte {
	var end struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	end.Error.Code, end.Error.Message = code, msg
	data, _ := json.Marshal(end) // strings only: it cannot fail
	out := make([]byte, 5, 5+len(data))
	out[0] = endStreamFlag
	binary.BigEndian.PutUint32(out[1:], uint32(len(data)))
	return append(out, data...)
}

// startPID is the pid of a Start's first message, its start event (process.StartResponse
// {event: {start: {pid}}}), in JSON or protobuf; 0 if it is not one.
func startPID(data []byte, isJSON bool) uint32 {
	if isJSON {
		var m struct {
			Event struct {
				Start struct {
					PID uint32 `json:"pid"`
				} `json:"start"`
			} `json:"event"`
		}
		if json.Unmarshal(data, &m) != nil {
			return 0
		}
		return m.Event.Start.PID
	}
	// Field 1 (event) of StartResponse, its field 1 (start), and that one's field 1 (pid).
	for depth := 0; depth < 2; depth++ {
		if data = protoField(data, protowire.BytesType); data == nil {
			return 0
		}
	}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return 0
		}
		data = data[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return 0
			}
			return uint32(v)
		}
		if n = protowire.ConsumeFieldValue(num, typ, data); n < 0 {
			return 0
		}
		data = data[n:]
	}
	return 0
}

// protoField is the value of field 1 of the message data, of wire type typ (bytes), or nil.
func protoField(data []byte, typ protowire.Type) []byte {
	for len(data) > 0 {
		num, t, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil
		}
		data = data[n:]
		if num == 1 && t == typ {
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return nil
			}
			return v
		}
		if n = protowire.ConsumeFieldValue(num, t, data); n < 0 {
			return nil
		}
		data = data[n:]
	}
	return nil
}
