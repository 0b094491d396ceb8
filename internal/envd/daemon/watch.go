package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/filesystem"
	"github.com/hangar-dev/hangar/internal/ids"
)

// watch is one directory watch (inotify through fsnotify). Its run goroutine queues an event
// per change; the queue is drained by a WatchDir stream or by GetWatcherEvents.
type watch struct {
	fsw          *fsnotify.Watcher
	root         string
	recursive    bool
	includeEntry bool
	q            *queue[*rpc.FilesystemEvent]
	done         chan struct{} // closed when run returns
}

// watchers counts the open watches and holds those made by CreateWatcher.
type watchers struct {
	max int

	mu     sync.Mutex // protects the fields below
	open   int
	byID   map[string]*watch
	closed bool
}

func newWatchers(max int) *watchers {
	return &watchers{max: max, byID: map[string]*watch{}}
}

// start begins watching root (recursively: with every directory under it, including those
// created later). The caller must stop the watch.
func (ws *watchers) start(root string, recursive, includeEntry bool, queueBytes int) (*watch, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError("watch", root, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("watch %q: it is not a directory", root))
	}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the daemon is shutting down"))
	}
	if ws.open >= ws.max {
		ws.mu.Unlock()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %q: %d directory watches are open already, the most this daemon allows", root, ws.max))
	}
	ws.open++
	ws.mu.Unlock()
	release := func() {
		ws.mu.Lock()
		ws.open--
		ws.mu.Unlock()
	}

	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		release()
		if errors.Is(err, syscall.EMFILE) {
			// inotify_init1 says EMFILE both when the daemon has no descriptor left and when its
			// user has all the inotify instances the kernel allows.
			err = fmt.Errorf("the daemon is out of file descriptors or inotify instances (RLIMIT_NOFILE, fs.inotify.max_user_instances): %w", err)
		}
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %q: %w", root, err))
	}
	// A watch's queue never waits for room (a full one ends the subscriber), so it needs no clock.
	w := &watch{fsw: fsw, root: root, recursive: recursive, includeEntry: includeEntry, q: newQueue[*rpc.FilesystemEvent](queueBytes, nil), done: make(chan struct{})}
	if err := w.add(root); err != nil {
		fsw.Close()
		release()
		return nil, fsError("watch", root, err)
	}
	go func() {
		defer release()
		w.run()
	}()
	return w, nil
}

// add watches dir, and with recursive every directory under it.
func (w *watch) add(dir string) error {
	if !w.recursive {
		return w.fsw.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // a subdirectory gone or unreadable: watch the rest
		}
		if de.IsDir() {
			if err := w.fsw.Add(p); err != nil && p == dir {
				return err
			}
		}
		return nil
	})
}

// run turns fsnotify's events into queued FilesystemEvents until the watch is stopped.
func (w *watch) run() {
	defer close(w.done)
	defer w.q.close()
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			newDir := false
			if w.recursive && ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					_ = w.add(ev.Name)
					newDir = true
				}
			}
			w.push(ev)
			if newDir {
				w.reportEntries(ev.Name)
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.q.fail(fmt.Errorf("the watch of %q failed: %w", w.root, err))
			w.fsw.Close()
		}
	}
}

var opTypes = []struct {
	op fsnotify.Op
	t  rpc.EventType
}{
	{fsnotify.Create, rpc.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Write, rpc.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, rpc.EventType_EVENT_TYPE_REMOVE},
	{fsnotify.Rename, rpc.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, rpc.EventType_EVENT_TYPE_CHMOD},
}

// convert makes one event per operation in ev, named relative to the watched directory.
func (w *watch) convert(ev fsnotify.Event) []*rpc.FilesystemEvent {
	name, err := filepath.Rel(w.root, ev.Name)
	if err != nil {
		name = ev.Name
	}
	var out []*rpc.FilesystemEvent
	for _, ot := range opTypes {
		if !ev.Has(ot.op) {
			continue
		}
		fe := &rpc.FilesystemEvent{Name: name, Type: ot.t}
		if w.includeEntry && ot.op != fsnotify.Remove && ot.op != fsnotify.Rename {
			if e, err := entryInfo(ev.Name); err == nil {
				fe.Entry = e
			}
		}
		out = append(out, fe)
	}
	return out
}

// push queues ev's events; a full queue ends the watch (the subscriber is too slow).
func (w *watch) push(ev fsnotify.Event) {
	for _, fe := range w.convert(ev) {
		if !w.q.push(fe, len(fe.Name)+eventOverhead) {
			w.fsw.Close()
		}
	}
}

// reportEntries reports, as created, what a directory new to a recursive watch held when its
// own watch was put in place: entries made in it before that (a `mkdir -p a/b`, a file written
// at once, a directory moved in) have no event of their own. One made just after may be
// reported twice; none is missed.
func (w *watch) reportEntries(dir string) {
	_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && p != dir {
			w.push(fsnotify.Event{Name: p, Op: fsnotify.Create})
		}
		return nil
	})
}

// stop ends the watch and waits for its goroutine.
func (w *watch) stop() {
	w.fsw.Close()
	<-w.done
}

// register keeps w for GetWatcherEvents and returns its id.
func (ws *watchers) register(w *watch) string {
	id := ids.Hex("", 24)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.byID[id] = w
	return id
}

func (ws *watchers) get(id string) (*watch, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher with id %q", id))
	}
	return w, nil
}

func (ws *watchers) remove(id string) (*watch, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no watcher with id %q", id))
	}
	delete(ws.byID, id)
	return w, nil
}

// closeAll stops every CreateWatcher watch and refuses new ones; WatchDir streams stop
// their own watches when the daemon ends them.
func (ws *watchers) closeAll() {
	ws.mu.Lock()
	ws.closed = true
	all := ws.byID
	ws.byID = map[string]*watch{}
	ws.mu.Unlock()
	for _, w := range all {
		w.stop()
	}
}

func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[rpc.WatchDirRequest], stream *connect.ServerStream[rpc.WatchDirResponse]) error {
	root, _, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return err
	}
	w, err := s.d.watch.start(root, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry(), s.d.cfg.SubscriberQueueBytes)
	if err != nil {
		return err
	}
	defer w.stop()
	if err := stream.Send(&rpc.WatchDirResponse{Event: &rpc.WatchDirResponse_Start{Start: &rpc.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	return drain(s.d, ctx, w.q, s.d.keepaliveInterval(req.Header()),
		func(fe *rpc.FilesystemEvent) error {
			return stream.Send(&rpc.WatchDirResponse{Event: &rpc.WatchDirResponse_Filesystem{Filesystem: fe}})
		},
		func() error {
			return stream.Send(&rpc.WatchDirResponse{Event: &rpc.WatchDirResponse_Keepalive{Keepalive: &rpc.WatchDirResponse_KeepAlive{}}})
		})
}

func (s *filesystemService) CreateWatcher(ctx context.Context, req *connect.Request[rpc.CreateWatcherRequest]) (*connect.Response[rpc.CreateWatcherResponse], error) {
	root, _, err := s.path(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	w, err := s.d.watch.start(root, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry(), s.d.cfg.SubscriberQueueBytes)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&rpc.CreateWatcherResponse{WatcherId: s.d.watch.register(w)}), nil
}

func (s *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[rpc.GetWatcherEventsRequest]) (*connect.Response[rpc.GetWatcherEventsResponse], error) {
	w, err := s.d.watch.get(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	events, _, err := w.q.take()
	if err != nil {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%w; remove this watcher and create a new one", err))
	}
	return connect.NewResponse(&rpc.GetWatcherEventsResponse{Events: events}), nil
}

func (s *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[rpc.RemoveWatcherRequest]) (*connect.Response[rpc.RemoveWatcherResponse], error) {
	w, err := s.d.watch.remove(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	w.stop()
	return connect.NewResponse(&rpc.RemoveWatcherResponse{}), nil
}
