package envd

import (
	"context"
	"io"

	"connectrpc.com/connect"

	fsrpc "github.com/hangar-dev/hangar/internal/envd/spec/filesystem"
)

// FileOp is what happened to a watched entry.
type FileOp string

// The operations a watch reports, and its keepalive.
const (
	OpCreate    FileOp = "create"
	OpWrite     FileOp = "write"
	OpRemove    FileOp = "remove"
	OpRename    FileOp = "rename"
	OpChmod     FileOp = "chmod"
	OpKeepalive FileOp = "keepalive" // nothing happened for the keepalive interval
)

var fileOps = map[fsrpc.EventType]FileOp{
	fsrpc.EventType_EVENT_TYPE_CREATE: OpCreate,
	fsrpc.EventType_EVENT_TYPE_WRITE:  OpWrite,
	fsrpc.EventType_EVENT_TYPE_REMOVE: OpRemove,
	fsrpc.EventType_EVENT_TYPE_RENAME: OpRename,
	fsrpc.EventType_EVENT_TYPE_CHMOD:  OpChmod,
}

// FileEvent is one change under a watched directory.
type FileEvent struct {
	Op   FileOp
	Name string // relative to the watched directory
}

// WatchStream is a directory watch. One goroutine at a time may call Next.
type WatchStream struct {
	ctx context.Context
	op  string
	st  *connect.ServerStreamForClient[fsrpc.WatchDirResponse]
}

// WatchDir watches the directory at path (with recursive, every directory under it) and
// returns once the watch is in place.
func (c *Client) WatchDir(ctx context.Context, path string, recursive bool) (*WatchStream, error) {
	op := "watch " + path
	st, err := c.fs.WatchDir(ctx, connect.NewRequest(&fsrpc.WatchDirRequest{Path: path, Recursive: recursive}))
	if err != nil {
		return nil, wrapErr(ctx, op, err)
	}
	if !st.Receive() {
		err := st.Err()
		st.Close()
		if err == nil {
			err = connect.NewError(connect.CodeUnknown, errUnexpected)
		}
		return nil, wrapErr(ctx, op, err)
	}
	if st.Msg().GetStart() == nil {
		st.Close()
		return nil, &Error{Op: op, Code: connect.CodeInternal, Message: "the first event was not start", kind: ErrDaemon, cause: errUnexpected}
	}
	return &WatchStream{ctx: ctx, op: op, st: st}, nil
}

// Next returns the next change or keepalive. io.EOF: the daemon ended the watch cleanly.
func (w *WatchStream) Next() (FileEvent, error) {
	for w.st.Receive() {
		switch ev := w.st.Msg().GetEvent().(type) {
		case *fsrpc.WatchDirResponse_Filesystem:
			if op, ok := fileOps[ev.Filesystem.GetType()]; ok {
				return FileEvent{Op: op, Name: ev.Filesystem.GetName()}, nil
			}
		case *fsrpc.WatchDirResponse_Keepalive:
			return FileEvent{Op: OpKeepalive}, nil
		}
	}
	if err := w.st.Err(); err != nil {
		return FileEvent{}, wrapStreamErr(w.ctx, w.op, err)
	}
	return FileEvent{}, io.EOF
}

// Close ends the watch.
func (w *WatchStream) Close() error { return w.st.Close() }
