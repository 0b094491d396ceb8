package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// uploadedEntry is one element of POST /files's answer, as envd gives it.
type uploadedEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// handleDownload answers GET /files?path=: the file's bytes (ranges are honoured).
func (d *Daemon) handleDownload(w http.ResponseWriter, r *http.Request) {
	id := identityFrom(r.Context())
	raw := r.URL.Query().Get("path")
	if raw == "" {
		writeError(w, r, http.StatusBadRequest, "download needs the path query parameter: GET /files?path=/path/to/file")
		return
	}
	path, err := d.resolvePath(id, raw)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeFileError(w, r, path, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeFileError(w, r, path, err)
		return
	}
	if fi.IsDir() {
		writeError(w, r, http.StatusBadRequest, fmt.Sprintf("path %q is a directory", path))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(path)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// handleUpload answers POST /files: the body as a file at ?path= (application/octet-stream),
// or each "file" part of a multipart/form-data body, at ?path= or, without it, at the part's
// file name with its directories (as E2B's envd, and its SDKs' files.write of several files,
// which send each file's destination there). Parent directories are created; an existing file
// is replaced.
func (d *Daemon) handleUpload(w http.ResponseWriter, r *http.Request) {
	id := identityFrom(r.Context())
	raw := r.URL.Query().Get("path")
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []uploadedEntry
	if mediaType == "multipart/form-data" {
		var status int
		var err error
		if written, status, err = d.uploadParts(r, id, raw); err != nil {
			writeError(w, r, status, err.Error())
			return
		}
	} else {
		if raw == "" {
			writeError(w, r, http.StatusBadRequest, "an octet-stream upload needs the path query parameter: POST /files?path=/path/to/file")
			return
		}
		path, err := d.resolvePath(id, raw)
		if err != nil {
			writeError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		e, status, err := d.writeFile(id, path, r.Body)
		if err != nil {
			writeError(w, r, status, err.Error())
			return
		}
		written = append(written, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(written)
}

// uploadParts writes each "file" part of r's multipart body, at raw when set, else at the
// part's file name. Two parts for one path are refused, as E2B's envd does (the first is
// written). On failure it returns the HTTP status to answer.
func (d *Daemon) uploadParts(r *http.Request, id *identity, raw string) ([]uploadedEntry, int, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("the multipart body cannot be read: %w", err)
	}
	var written []uploadedEntry
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("the multipart body cannot be read: %w", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		e, status, err := d.uploadPart(id, raw, part, written)
		part.Close()
		if err != nil {
			return nil, status, err
		}
		written = append(written, e)
	}
	if len(written) == 0 {
		return nil, http.StatusBadRequest, errors.New(`the multipart body has no part named "file"`)
	}
	return written, 0, nil
}

func (d *Daemon) uploadPart(id *identity, raw string, part *multipart.Part, done []uploadedEntry) (uploadedEntry, int, error) {
	target := raw
	if target == "" {
		target = partFileName(part)
	}
	if target == "" {
		return uploadedEntry{}, http.StatusBadRequest, errors.New("upload needs the path query parameter or a file name on each part")
	}
	path, err := d.resolvePath(id, target)
	if err != nil {
		return uploadedEntry{}, http.StatusBadRequest, err
	}
	for _, e := range done {
		if e.Path == path {
			return uploadedEntry{}, http.StatusBadRequest, fmt.Errorf("two files of one upload go to %q: only the first was written", path)
		}
	}
	return d.writeFile(id, path, part)
}

// partFileName is the filename parameter of part's Content-Disposition, with its
// directories: part.FileName keeps only the base name.
func partFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeFile writes src to path as id, creating parent directories; on failure it returns the
// HTTP status to answer.
func (d *Daemon) writeFile(id *identity, path string, src io.Reader) (uploadedEntry, int, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return uploadedEntry{}, http.StatusBadRequest, fmt.Errorf("path %q is a directory", path)
	}
	if err := mkdirAllAs(id, filepath.Dir(path)); err != nil {
		return uploadedEntry{}, http.StatusInternalServerError, fmt.Errorf("create the directories of %q: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return uploadedEntry{}, statusFor(err), fmt.Errorf("open %q for writing: %w", path, err)
	}
	id.chown(path)
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		if strings.Contains(err.Error(), "no space left") {
			return uploadedEntry{}, http.StatusInsufficientStorage, errors.New("not enough disk space available")
		}
		return uploadedEntry{}, http.StatusInternalServerError, fmt.Errorf("write %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return uploadedEntry{}, http.StatusInternalServerError, fmt.Errorf("write %q: %w", path, err)
	}
	return uploadedEntry{Path: path, Name: filepath.Base(path), Type: "file"}, 0, nil
}

// mkdirAllAs creates dir and its missing parents, owned by id.
func mkdirAllAs(id *identity, dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%q is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllAs(id, parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	id.chown(dir)
	return nil
}

func statusFor(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeFileError(w http.ResponseWriter, r *http.Request, path string, err error) {
	status := statusFor(err)
	msg := fmt.Sprintf("cannot read %q: %v", path, err)
	if status == http.StatusNotFound {
		msg = fmt.Sprintf("path %q does not exist", path)
	}
	writeError(w, r, status, msg)
}
