package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/filesystem"
)

// filesystemService implements filesystem.Filesystem over the sandbox's files. Relative
// paths are relative to the default working directory (else the user's home).
type filesystemService struct {
	d *Daemon
}

// fsError maps a file system error to a Connect error with a sentence for a person.
func fsError(verb, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q: no such file or directory", verb, path))
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s %q: it already exists", verb, path))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %q: permission denied", verb, path))
	case errors.Is(err, syscall.ENOTDIR):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %q: a part of the path is not a directory", verb, path))
	case errors.Is(err, syscall.ENOTEMPTY):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s %q: the directory is not empty", verb, path))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s %q: %w", verb, path, err))
}

func (s *filesystemService) path(ctx context.Context, p string) (string, *identity, error) {
	id := identityFrom(ctx)
	if id == nil {
		return "", nil, connect.NewError(connect.CodeInternal, errors.New("the request has no user"))
	}
	path, err := s.d.resolvePath(id, p)
	if err != nil {
		return "", nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return path, id, nil
}

// entryInfo describes the entry at path without following a final symbolic link.
func entryInfo(path string) (*rpc.EntryInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return entryFromInfo(path, fi), nil
}

func entryFromInfo(path string, fi fs.FileInfo) *rpc.EntryInfo {
	e := &rpc.EntryInfo{
		Name:         fi.Name(),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
		Type:         rpc.FileType_FILE_TYPE_FILE,
	}
	switch {
	case fi.IsDir():
		e.Type = rpc.FileType_FILE_TYPE_DIRECTORY
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = rpc.FileType_FILE_TYPE_SYMLINK
		if target, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &target
		}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = strconv.FormatUint(uint64(st.Uid), 10)
		if u, err := user.LookupId(e.Owner); err == nil {
			e.Owner = u.Username
		}
		e.Group = strconv.FormatUint(uint64(st.Gid), 10)
		if g, err := user.LookupGroupId(e.Group); err == nil {
			e.Group = g.Name
		}
	}
	return e
}

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[rpc.StatRequest]) (*connect.Response[rpc.StatResponse], error) {
	path, _, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := entryInfo(path)
	if err != nil {
		return nil, fsError("stat", path, err)
	}
	return connect.NewResponse(&rpc.StatResponse{Entry: e}), nil
}

func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[rpc.MakeDirRequest]) (*connect.Response[rpc.MakeDirResponse], error) {
	if req.Msg.GetPath() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("make dir needs a path"))
	}
	path, id, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("make dir %q: the directory already exists", path))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("make dir %q: a file is in the way", path))
	}
	if err := mkdirAllAs(id, path); err != nil {
		return nil, fsError("make dir", path, err)
	}
	e, err := entryInfo(path)
	if err != nil {
		return nil, fsError("make dir", path, err)
	}
	return connect.NewResponse(&rpc.MakeDirResponse{Entry: e}), nil
}

func (s *filesystemService) Move(ctx context.Context, req *connect.Request[rpc.MoveRequest]) (*connect.Response[rpc.MoveResponse], error) {
	if req.Msg.GetSource() == "" || req.Msg.GetDestination() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("move needs a source and a destination"))
	}
	src, id, err := s.path(ctx, req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := s.d.resolvePath(id, req.Msg.GetDestination())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError("move", src, err)
	}
	if err := mkdirAllAs(id, filepath.Dir(dst)); err != nil {
		return nil, fsError("move to", dst, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError("move to", dst, err)
	}
	e, err := entryInfo(dst)
	if err != nil {
		return nil, fsError("move to", dst, err)
	}
	return connect.NewResponse(&rpc.MoveResponse{Entry: e}), nil
}

// maxListDepth bounds ListDir's depth so one request cannot walk a whole disk by accident.
const maxListDepth = 32

func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[rpc.ListDirRequest]) (*connect.Response[rpc.ListDirResponse], error) {
	root, _, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	if depth > maxListDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("list dir: depth %d is more than %d", depth, maxListDepth))
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError("list dir", root, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("list dir %q: it is not a directory", root))
	}
	res := &rpc.ListDirResponse{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range entries {
			p := filepath.Join(dir, de.Name())
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			res.Entries = append(res.Entries, entryFromInfo(p, info))
			if de.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, fsError("list dir", root, err)
	}
	return connect.NewResponse(res), nil
}

func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[rpc.RemoveRequest]) (*connect.Response[rpc.RemoveResponse], error) {
	if req.Msg.GetPath() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("remove needs a path"))
	}
	path, _, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	// A path that does not exist is removed already: success, as on E2B's envd (whose SDKs'
	// files.remove expects it).
	if err := os.RemoveAll(path); err != nil {
		return nil, fsError("remove", path, err)
	}
	return connect.NewResponse(&rpc.RemoveResponse{}), nil
}
