package daemon_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shortWait bounds what should happen at once.
const shortWait = 10 * time.Second

// serve runs a daemon with cfg on 127.0.0.1:0 until the test ends and returns its base URL.
func serve(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	ln, err := daemon.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + daemon.Address(ln)
}

// Envelope flags of the Connect protocol.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
)

// envelope is one enveloped message: a flags byte, a big-endian uint32 length, the message.
type envelope struct {
	flags byte
	data  []byte
}

// envelopeBytes envelopes each message (uncompressed, not end-stream).
func envelopeBytes(msgs ...[]byte) []byte {
	var b bytes.Buffer
	for _, m := range msgs {
		var hdr [5]byte
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(m)))
		b.Write(hdr[:])
		b.Write(m)
	}
	return b.Bytes()
}

var errTruncated = errors.New("truncated envelope")

// readEnvelope reads the next envelope of r; io.EOF at a clean end.
func readEnvelope(r io.Reader) (envelope, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return envelope{}, errTruncated
		}
		return envelope{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 64<<20 {
		return envelope{}, fmt.Errorf("envelope of %d bytes", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return envelope{}, errTruncated
	}
	return envelope{flags: hdr[0], data: data}, nil
}

// jsonMap decodes a JSON object.
func jsonMap(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", data, err)
	}
	return m
}

// canonical re-encodes a JSON value so that two can be compared as strings.
func canonical(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rpcStream posts a Connect streaming request with the JSON codec, as E2B's SDKs send it,
// and returns the response (the caller reads its envelopes and closes it).
func rpcStream(t *testing.T, ctx context.Context, url, procedure string, header http.Header, msgs ...string) *http.Response {
	t.Helper()
	var raw [][]byte
	for _, m := range msgs {
		raw = append(raw, []byte(m))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/"+procedure, bytes.NewReader(envelopeBytes(raw...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// rpcUnary posts a Connect unary request with the JSON codec and returns the status and the
// decoded body.
func rpcUnary(t *testing.T, ctx context.Context, url, procedure string, header http.Header, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/"+procedure, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, jsonMap(t, data)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// jsonNumber formats a JSON number as encoding/json decoded it.
func jsonNumber(f float64) string { return fmt.Sprintf("%d", int64(f)) }
