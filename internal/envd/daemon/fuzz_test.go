package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// fuzzProcedures are the procedures the fuzzer calls: every one that neither starts a process
// nor changes files nor waits for events (those would make the fuzzer's runs unbounded).
var fuzzProcedures = []struct {
	path      string
	streaming bool
}{
	{"/process.Process/List", false},
	{"/process.Process/Connect", true},
	{"/process.Process/Update", false},
	{"/process.Process/SendInput", false},
	{"/process.Process/SendSignal", false},
	{"/process.Process/CloseStdin", false},
	{"/process.Process/StreamInput", true},
	{"/filesystem.Filesystem/Stat", false},
	{"/filesystem.Filesystem/GetWatcherEvents", false},
	{"/filesystem.Filesystem/RemoveWatcher", false},
}

var connectCodes = map[string]bool{
	"canceled": true, "unknown": true, "invalid_argument": true, "deadline_exceeded": true,
	"not_found": true, "already_exists": true, "permission_denied": true, "resource_exhausted": true,
	"failed_precondition": true, "aborted": true, "out_of_range": true, "unimplemented": true,
	"internal": true, "unavailable": true, "data_loss": true, "unauthenticated": true,
}

// FuzzRequests sends arbitrary bodies, enveloped or not, with either codec, to the daemon's
// procedures. The daemon must never crash, and must answer either a well-formed Connect
// error or, for a stream, well-formed envelopes ending in exactly one end-of-stream message.
func FuzzRequests(f *testing.F) {
	f.Add(uint8(0), true, true, []byte(`{}`))
	f.Add(uint8(1), true, true, envelopeBytes([]byte(`{"process":{"pid":4000000}}`)))
	f.Add(uint8(1), true, true, envelopeBytes([]byte(`{"process":{"tag":"x"}}`)))
	f.Add(uint8(1), true, true, envelopeBytes([]byte(`{"process":{}}`)))
	f.Add(uint8(1), false, true, envelopeBytes([]byte{0x0a, 0x02, 0x08, 0x01}))
	f.Add(uint8(1), true, true, []byte{0x00, 0x00, 0x00, 0x10, 0x00, '{'})
	f.Add(uint8(1), true, true, []byte{0x01, 0x00, 0x00, 0x00, 0x02, '{', '}'})
	f.Add(uint8(2), true, false, []byte(`{"process":{"pid":1},"pty":{"size":{"cols":0,"rows":70000}}}`))
	f.Add(uint8(3), true, false, []byte(`{"process":{"pid":1},"input":{"stdin":"!!notbase64"}}`))
	f.Add(uint8(3), false, false, []byte{0x0a, 0x02, 0x08, 0x01, 0x12, 0x03, 0x0a, 0x01, 'x'})
	f.Add(uint8(4), true, false, []byte(`{"process":{"pid":1},"signal":"SIGNAL_SIGSTOP"}`))
	f.Add(uint8(4), true, false, []byte(`{"process":{"pid":1},"signal":19}`))
	f.Add(uint8(5), true, false, []byte(`{"process":null}`))
	f.Add(uint8(6), true, true, envelopeBytes([]byte(`{"data":{"input":{"stdin":"eA=="}}}`), []byte(`{"start":{"process":{"pid":1}}}`)))
	f.Add(uint8(6), true, true, envelopeBytes([]byte(`{"keepalive":{}}`)))
	f.Add(uint8(7), true, false, []byte(`{"path":"/proc/self/../../\u0000"}`))
	f.Add(uint8(8), true, false, []byte(`{"watcherId":""}`))
	f.Add(uint8(9), false, false, []byte{0xff, 0xff, 0xff})

	d := daemon.New(daemon.Config{})
	f.Cleanup(d.Close)
	h := d.Handler()

	f.Fuzz(func(t *testing.T, which uint8, useJSON, enveloped bool, body []byte) {
		p := fuzzProcedures[int(which)%len(fuzzProcedures)]
		ct := "application/"
		if p.streaming || enveloped {
			ct += "connect+"
		}
		if useJSON {
			ct += "json"
		} else {
			ct += "proto"
		}
		req := httptest.NewRequest(http.MethodPost, p.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Connect-Protocol-Version", "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		data, _ := io.ReadAll(res.Body)

		if res.StatusCode != http.StatusOK {
			checkErrorBody(t, res.StatusCode, data)
			return
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/connect+") {
			return // a unary answer: the codec decoded it
		}
		r := bytes.NewReader(data)
		for {
			env, err := readEnvelope(r)
			if err != nil {
				t.Fatalf("status 200 stream without an end-of-stream message: %v (%q)", err, data)
			}
			if env.flags&flagEndStream == 0 {
				continue
			}
			var end struct {
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(env.data, &end); err != nil {
				t.Fatalf("end-of-stream message is not JSON: %q", env.data)
			}
			if end.Error != nil && (!connectCodes[end.Error.Code] || end.Error.Message == "") {
				t.Fatalf("end-of-stream error without a known code and a message: %q", env.data)
			}
			if _, err := readEnvelope(r); !errors.Is(err, io.EOF) {
				t.Fatalf("something after the end of the stream: %v", err)
			}
			return
		}
	})
}

// checkErrorBody checks a non-200 answer is a Connect error with a code and a message, or a
// plain HTTP refusal of the content type.
func checkErrorBody(t *testing.T, status int, data []byte) {
	t.Helper()
	if status == http.StatusUnsupportedMediaType || status == http.StatusMethodNotAllowed {
		return
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("status %d with a body that is not a JSON error: %q", status, data)
	}
	if !connectCodes[e.Code] || e.Message == "" {
		t.Fatalf("status %d: error without a known code and a message: %q", status, data)
	}
}
