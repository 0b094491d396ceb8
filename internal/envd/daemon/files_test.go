package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/envd/daemon"
)

// multipartBody is a multipart/form-data body with one "file" part per name, as E2B's SDKs
// send files.write([...]): the destination path is the part's file name.
func multipartBody(t *testing.T, files ...[2]string) (string, *bytes.Buffer) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+f[0]+`"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, f[1])
	}
	mw.Close()
	return mw.FormDataContentType(), &b
}

func post(t *testing.T, url, contentType string, body io.Reader) (int, string) {
	t.Helper()
	res, err := http.Post(url, contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestUploadKeepsPartPaths: each part of a multipart upload lands at the full path of its
// file name (relative names under the working directory), as E2B's envd does.
func TestUploadKeepsPartPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := serve(t, daemon.Config{Workdir: dir})
	ct, body := multipartBody(t, [2]string{dir + "/a/one.txt", "1"}, [2]string{"b/two.txt", "2"})
	status, got := post(t, url+"/files", ct, body)
	if status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, got)
	}
	var entries []map[string]string
	if err := json.Unmarshal([]byte(got), &entries); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"path": dir + "/a/one.txt", "name": "one.txt", "type": "file"},
		{"path": dir + "/b/two.txt", "name": "two.txt", "type": "file"},
	}
	if canonical(t, entries) != canonical(t, want) {
		t.Errorf("answer %s, want %s", canonical(t, entries), canonical(t, want))
	}
	for _, f := range [][2]string{{"a/one.txt", "1"}, {"b/two.txt", "2"}} {
		if b, err := os.ReadFile(filepath.Join(dir, f[0])); err != nil || string(b) != f[1] {
			t.Errorf("%s: %q, %v", f[0], b, err)
		}
	}

	// Two parts for one path: 400, the first is written.
	ct, body = multipartBody(t, [2]string{"c.txt", "first"}, [2]string{dir + "/c.txt", "second"})
	if status, got = post(t, url+"/files", ct, body); status != http.StatusBadRequest || !strings.Contains(got, "c.txt") {
		t.Errorf("two parts for one path: %d %s", status, got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "c.txt")); string(b) != "first" {
		t.Errorf("c.txt holds %q, want the first part", b)
	}
}

// TestNulInPath: a NUL byte in any path is the client's mistake (400, invalid_argument).
func TestNulInPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := serve(t, daemon.Config{Workdir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	for _, tc := range []struct{ procedure, body string }{
		{"filesystem.Filesystem/Stat", `{"path":"a\u0000b"}`},
		{"filesystem.Filesystem/MakeDir", `{"path":"a\u0000b"}`},
		{"filesystem.Filesystem/Remove", `{"path":"a\u0000b"}`},
		{"filesystem.Filesystem/ListDir", `{"path":"a\u0000b"}`},
		{"filesystem.Filesystem/Move", `{"source":"a\u0000b","destination":"c"}`},
		{"filesystem.Filesystem/Move", `{"source":"` + dir + `","destination":"c\u0000"}`},
		{"filesystem.Filesystem/CreateWatcher", `{"path":"a\u0000b"}`},
	} {
		status, body := rpcUnary(t, ctx, url, tc.procedure, nil, tc.body)
		if status != http.StatusBadRequest || body["code"] != "invalid_argument" || !strings.Contains(body["message"].(string), "NUL") {
			t.Errorf("%s %s: %d %v", tc.procedure, tc.body, status, body)
		}
	}
	st := open(t, rpcStream(t, ctx, url, "process.Process/Start", nil, `{"process":{"cmd":"true","cwd":"a\u0000"}}`))
	if end := st.end(); canonical(t, end["error"].(map[string]any)["code"]) != `"invalid_argument"` {
		t.Errorf("start with a NUL in cwd: %v", end)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequestWithContext(ctx, method, url+"/files?path=a%00b", strings.NewReader("x"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "NUL") {
			t.Errorf("%s /files with a NUL: %d %s", method, res.StatusCode, got)
		}
	}
	ct, body := multipartBody(t, [2]string{"a\x00b", "x"})
	if status, got := post(t, url+"/files", ct, body); status != http.StatusBadRequest {
		t.Errorf("multipart part named with a NUL: %d %s", status, got)
	}
}
