package serving

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"strings"
	"testing"
)

// TestWriteChunk: a batch goes out as one chunk of a chunked body, which Go's own chunked
// reader reads back whole, for sizes whose size lines have one to several digits; an empty
// batch writes nothing (a chunk of size 0 would end the body).
func TestWriteChunk(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	c := &Taken{conn: server, conns: new(TakenConns)}
	sizes := []int{1, 15, 16, 255, 4096, 70000}
	go func() {
		b := make([]byte, ChunkRoom)
		for _, n := range sizes {
			b, _ = c.WriteChunk(b) // empty: nothing
			b = append(b, strings.Repeat("x", n)...)
			var err error
			if b, err = c.WriteChunk(b); err != nil || len(b) != ChunkRoom {
				t.Errorf("WriteChunk of %d bytes: %v, left %d bytes", n, err, len(b))
			}
		}
		c.End()
	}()
	wire, err := io.ReadAll(client) // until End closes the connection
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	total := 0
	for _, n := range sizes {
		want.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n" + strings.Repeat("x", n) + "\r\n")
		total += n
	}
	want.WriteString("0\r\n\r\n")
	if string(wire) != want.String() {
		t.Errorf("the wire has %d bytes unlike the chunks', starting %.80q", len(wire), wire)
	}
	if got, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(wire))); err != nil || len(got) != total {
		t.Errorf("Go's chunked reader read %d of %d bytes: %v", len(got), total, err)
	}
}

// TestTakenConnsCloseAll: the server's grace over, the connections taken over are closed,
// and one taken later is refused and closed.
func TestTakenConnsCloseAll(t *testing.T) {
	t.Parallel()
	var tc TakenConns
	c1, p1 := net.Pipe()
	defer p1.Close()
	if !tc.add(c1) {
		t.Fatal("add refused before CloseAll")
	}
	tc.CloseAll()
	if _, err := c1.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write to a connection kept: %v, want it closed", err)
	}
	c2, p2 := net.Pipe()
	defer c2.Close()
	defer p2.Close()
	if tc.add(c2) {
		t.Error("add took a connection after CloseAll")
	}
}
