package envd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	fsrpc "github.com/hangar-dev/hangar/internal/envd/spec/filesystem"
)

// Upload writes r to the file at path in the sandbox (POST /files, application/octet-stream),
// creating its parent directories and replacing what was there. A relative path is relative
// to the daemon's default directory.
func (c *Client) Upload(ctx context.Context, path string, r io.Reader) error {
	op := "upload " + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/files?path="+url.QueryEscape(path), r)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := c.do(ctx, op, req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return nil
}

// Download returns the content of the file at path (GET /files). The caller closes it.
func (c *Client) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	op := "download " + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/files?path="+url.QueryEscape(path), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	res, err := c.do(ctx, op, req)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// do sends an HTTP request to /files and turns a failure into an *Error.
func (c *Client) do(ctx context.Context, op string, req *http.Request) (*http.Response, error) {
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return nil, &Error{Op: op, Code: connect.CodeUnavailable, Message: err.Error(), kind: ErrUnavailable, cause: err}
	}
	if res.StatusCode/100 == 2 {
		return res, nil
	}
	defer res.Body.Close()
	var body struct {
		Message string `json:"message"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&body)
	return nil, httpError(op, res.StatusCode, body.Message)
}

// FileInfo describes a file, directory or symbolic link.
type FileInfo struct {
	Name     string
	Path     string
	Dir      bool
	Symlink  string // the target, for a symbolic link
	Size     int64
	Mode     uint32 // permission bits
	Owner    string
	Group    string
	Modified time.Time
}

func fileInfoFromProto(e *fsrpc.EntryInfo) FileInfo {
	return FileInfo{
		Name: e.GetName(), Path: e.GetPath(), Dir: e.GetType() == fsrpc.FileType_FILE_TYPE_DIRECTORY,
		Symlink: e.GetSymlinkTarget(), Size: e.GetSize(), Mode: e.GetMode(),
		Owner: e.GetOwner(), Group: e.GetGroup(), Modified: e.GetModifiedTime().AsTime(),
	}
}

// Stat describes the entry at path.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	res, err := c.fs.Stat(ctx, connect.NewRequest(&fsrpc.StatRequest{Path: path}))
	if err != nil {
		return FileInfo{}, wrapErr(ctx, "stat "+path, err)
	}
	return fileInfoFromProto(res.Msg.GetEntry()), nil
}

// ListDir lists the directory at path, depth levels deep (0 means 1).
func (c *Client) ListDir(ctx context.Context, path string, depth int) ([]FileInfo, error) {
	res, err := c.fs.ListDir(ctx, connect.NewRequest(&fsrpc.ListDirRequest{Path: path, Depth: uint32(max(depth, 0))}))
	if err != nil {
		return nil, wrapErr(ctx, "list "+path, err)
	}
	out := make([]FileInfo, 0, len(res.Msg.GetEntries()))
	for _, e := range res.Msg.GetEntries() {
		out = append(out, fileInfoFromProto(e))
	}
	return out, nil
}

// MakeDir creates the directory at path and its parents; ErrAlreadyExists when it exists.
func (c *Client) MakeDir(ctx context.Context, path string) error {
	_, err := c.fs.MakeDir(ctx, connect.NewRequest(&fsrpc.MakeDirRequest{Path: path}))
	return wrapErr(ctx, "make dir "+path, err)
}

// Move renames source to destination.
func (c *Client) Move(ctx context.Context, source, destination string) error {
	_, err := c.fs.Move(ctx, connect.NewRequest(&fsrpc.MoveRequest{Source: source, Destination: destination}))
	return wrapErr(ctx, "move "+source, err)
}

// Remove deletes the file or directory (with its content) at path; a missing path is not an
// error.
func (c *Client) Remove(ctx context.Context, path string) error {
	_, err := c.fs.Remove(ctx, connect.NewRequest(&fsrpc.RemoveRequest{Path: path}))
	return wrapErr(ctx, "remove "+path, err)
}
