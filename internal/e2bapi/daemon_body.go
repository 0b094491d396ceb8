package e2bapi

import (
	"encoding/binary"
	"encoding/json"
	"io"

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

	hdr    [5]byte // the header of the message being read, while it is
	hn     int     // bytes of hdr read so far
	left   uint32  // bytes of the current message's data still to come
	endMsg bool    // the daemon sent its own end-of-stream message
	tail   []byte  // hangar's end-of-stream message, being handed out
	ended  bool    // tail was made: the rest of the answer is tail, then EOF
}

func newPassedBody(rc io.ReadCloser, s *stream.Stream, connect bool) *passedBody {
	return &passedBody{ReadCloser: rc, s: s, connect: connect}
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
			p = p[k:]
			continue
		}
		k := copy(b.hdr[b.hn:], p)
		b.hn += k
		p = p[k:]
		if b.hn == len(b.hdr) {
			b.hn, b.left = 0, binary.BigEndian.Uint32(b.hdr[1:])
			if b.hdr[0]&endStreamFlag != 0 {
				b.endMsg = true
			}
		}
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
