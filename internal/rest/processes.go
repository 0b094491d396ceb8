package rest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hangar-dev/hangar/internal/process"
	"github.com/hangar-dev/hangar/internal/stream"
	"github.com/hangar-dev/hangar/internal/wire"
	"github.com/hangar-dev/hangar/internal/wire/from"
)

func (a *api) processRoutes(r chi.Router) {
	r.Use(a.toOwner)
	r.Post("/", a.startProcess)
	r.Get("/", a.listProcesses)
	r.Get("/{id}", a.readProcess)
	r.Get("/{id}/stream", a.streamProcess)
	r.Post("/{id}/input", a.inputProcess)
	r.Post("/{id}/resize", a.resizeProcess)
	r.Delete("/{id}", a.killProcess)
}

type startProcessRequest struct {
	Command string   `json:"command"`
	Cwd     string   `json:"cwd"`
	PTY     *ptySize `json:"pty"` // run it on a terminal of this size (needs the daemon)
}

// ptySize is a terminal's size in character cells, each between 1 and maxTermSize.
type ptySize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// maxTermSize bounds a terminal's columns and rows (as MCP's terminal tools do).
const maxTermSize = 1000

// size checks s and returns it in the domain's terms.
func (s ptySize) size() (*process.PTYSize, error) {
	if s.Cols < 1 || s.Rows < 1 || s.Cols > maxTermSize || s.Rows > maxTermSize {
		return nil, newError(CodeBadRequest, "A terminal's cols and rows must each be between 1 and 1000.", fmt.Errorf("cols %d, rows %d", s.Cols, s.Rows))
	}
	return &process.PTYSize{Cols: uint32(s.Cols), Rows: uint32(s.Rows)}, nil
}

func (a *api) startProcess(w http.ResponseWriter, r *http.Request) {
	var req startProcessRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	start := process.StartRequest{Command: req.Command, Cwd: req.Cwd}
	if req.PTY != nil {
		var err error
		if start.PTY, err = req.PTY.size(); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	info, err := a.Processes.Start(r.Context(), principal(r), chi.URLParam(r, "ref"), start)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, info.Wire())
}

func (a *api) listProcesses(w http.ResponseWriter, r *http.Request) {
	ps, err := a.Processes.List(r.Context(), principal(r), chi.URLParam(r, "ref"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"processes": from.Processes(ps)})
}

// since reads the position to resume from: Last-Event-ID (an SSE client reconnecting) wins over
// ?since=; neither means 0, from the start. what names the position in the error: a byte offset
// for processes, an event's seq for sessions and jobs.
func since(r *http.Request, what string) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("since")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, newError(CodeBadRequest, "since (or Last-Event-ID) must be "+what+": a whole number, 0 or more.", errors.New(v))
	}
	return n, nil
}

// What a resume position is, in since's errors.
const (
	byteOffset = "a byte offset"
	eventSeq   = "an event's seq"
)

// processSince is where a process's output is read from: since (or Last-Event-ID), or, with
// ?since_seconds=N, where what it printed in the last N seconds starts. Last-Event-ID still
// wins: a client reconnecting carries on where it was.
func (a *api) processSince(r *http.Request) (int64, error) {
	q := r.URL.Query()
	secs := q.Get("since_seconds")
	if secs == "" || r.Header.Get("Last-Event-ID") != "" {
		return since(r, byteOffset)
	}
	if q.Get("since") != "" {
		return 0, newError(CodeBadRequest, "Give since (a byte offset) or since_seconds (the output of the last N seconds), not both.", nil)
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n < 0 {
		return 0, newError(CodeBadRequest, "since_seconds must be a whole number of seconds, 0 or more.", errors.New(secs))
	}
	ago := time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second
	return a.Processes.OffsetSince(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"), ago)
}

// readProcess is GET .../processes/{id}: the process and its kept output from since.
func (a *api) readProcess(w http.ResponseWriter, r *http.Request) {
	pos, err := a.processSince(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out, info, err := a.Processes.Read(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"), pos)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res := wire.ProcessOutput{Process: info.Wire(), Gap: from.ProcessGap(out.Gap), Next: out.Next}
	res.Output, res.Encoding = wire.Text(out.Data)
	writeJSON(w, http.StatusOK, res)
}

// streamProcess is GET .../processes/{id}/stream: SSE output events whose id is the offset
// after them (so Last-Event-ID resumes exactly there), a gap event first if output since the
// offset is gone, then an end event once the process ended.
func (a *api) streamProcess(w http.ResponseWriter, r *http.Request) {
	from, err := a.processSince(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	att, err := a.Processes.Attach(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"), from)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer att.Close()
	sse, err := a.startSSE(w, r)
	defer sse.release()
	if err != nil {
		att.Stream.End(stream.ReasonClient)
		return
	}
	reason := a.pump(sse.context(), att.Stream, sse)
	sse.closeEvent(reason)
	sse.send()
}

type inputRequest struct {
	Input  string `json:"input"`
	Base64 bool   `json:"base64"` // input is base64 (for bytes that are not text)
	EOF    bool   `json:"eof"`    // close stdin after writing
}

func (a *api) inputProcess(w http.ResponseWriter, r *http.Request) {
	var req inputRequest
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	data := []byte(req.Input)
	if req.Base64 {
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.Input); err != nil {
			a.writeError(w, r, newError(CodeBadRequest, "input is not valid base64.", err))
			return
		}
	}
	if err := a.Processes.Input(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"), data, req.EOF); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resizeProcess is POST .../processes/{id}/resize {cols, rows}: a terminal's new size.
func (a *api) resizeProcess(w http.ResponseWriter, r *http.Request) {
	var req ptySize
	if err := decodeJSON(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	size, err := req.size()
	if err == nil {
		err = a.Processes.Resize(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"), *size)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) killProcess(w http.ResponseWriter, r *http.Request) {
	info, err := a.Processes.Kill(r.Context(), principal(r), chi.URLParam(r, "ref"), chi.URLParam(r, "id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, info.Wire())
}
