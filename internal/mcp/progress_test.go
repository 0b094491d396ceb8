package mcp

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/stream"
)

// renderBatch runs a tool that renders one batch of st with progress, and returns the
// notifications its client got, in the order of their progress (go-sdk's client hands each to
// its handler on a goroutine of its own).
func renderBatch(t *testing.T, st *stream.Stream, want int) []*mcp.ProgressNotificationParams {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "render"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		p := &progress{req: req, token: req.Params.GetProgressToken(), st: st}
		items, err := st.Next(ctx, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if err := p.item(ctx, it); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{}, nil, p.flush(ctx)
	})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	all := make(chan struct{})
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if got = append(got, req.Params); len(got) == want {
				close(all)
			}
		},
	})
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "render", Arguments: map[string]any{}}
	params.SetProgressToken("tok")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("got %d notifications, want %d", len(got), want)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(got, func(i, j int) bool { return got[i].Progress < got[j].Progress })
	return got
}

func openStream(t *testing.T) *stream.Stream {
	t.Helper()
	r := stream.New(stream.Config{})
	st, err := r.Open(context.Background(), stream.Options{Kind: stream.KindExec, Principal: auth.Principal{TokenID: "t", User: "u"}, Unpaced: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

type note struct {
	progress       float64
	event, message string
	encoding       string
}

func notes(ps []*mcp.ProgressNotificationParams) []note {
	var out []note
	for _, p := range ps {
		n := note{progress: p.Progress, message: p.Message}
		n.event, _ = p.Meta[metaStream].(string)
		n.encoding, _ = p.Meta[metaEncoding].(string)
		out = append(out, n)
	}
	return out
}

// TestProgressMergesABatch: output already queued when the writer takes goes out as one
// notification per run of the same event, text only; the progress is the bytes so far after
// the run, as for one notification per item.
func TestProgressMergesABatch(t *testing.T) {
	t.Parallel()
	st := openStream(t)
	for _, it := range []stream.Item{
		{Event: "stdout", Data: []byte("a\n")},
		{Event: "stdout", Data: []byte("b\n")},
		{Event: "stderr", Data: []byte("c\n")},
		{Event: "stdout", Data: []byte("d\n")},
		{Event: "stdout", Data: []byte{0xff}}, // not text: alone, base64
		{Event: "stdout", Data: []byte("e\n")},
		{Event: "stdout", Data: []byte("f\n")},
	} {
		st.Send(it)
	}
	want := []note{
		{progress: 4, event: "stdout", message: "a\nb\n"},
		{progress: 6, event: "stderr", message: "c\n"},
		{progress: 8, event: "stdout", message: "d\n"},
		{progress: 9, event: "stdout", message: "/w==", encoding: "base64"},
		{progress: 13, event: "stdout", message: "e\nf\n"},
	}
	got := notes(renderBatch(t, st, len(want)))
	if len(got) != len(want) {
		t.Fatalf("notifications = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("notification %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestProgressMergesPositions: a process's output items carry their end offsets; a run's
// progress is its last item's, and a run stops growing at the size of one item.
func TestProgressMergesPositions(t *testing.T) {
	t.Parallel()
	st := openStream(t)
	big := make([]byte, st.MaxItem()-2)
	for i := range big {
		big[i] = 'x'
	}
	for _, it := range []stream.Item{
		{Event: "output", ID: "102", Data: []byte("a\n")},
		{Event: "output", ID: "104", Data: []byte("b\n")},
		{Event: "output", ID: "106", Data: []byte("c\n")},
		{Event: "output", ID: "10000000", Data: big}, // joins no run: too big
	} {
		st.Send(it)
	}
	got := notes(renderBatch(t, st, 2))
	if len(got) != 2 || got[0] != (note{progress: 106, event: "output", message: "a\nb\nc\n"}) || got[1].progress != 10000000 || len(got[1].message) != len(big) {
		t.Fatalf("notifications = %.80v", got)
	}
}

// BenchmarkProgressRender renders a batch of 16 queued lines through go-sdk to an in-memory
// client: one notification for the batch.
func BenchmarkProgressRender(b *testing.B) {
	line := []byte("L 1 1764522000.123456\n")
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	var st *stream.Stream
	mcp.AddTool(srv, &mcp.Tool{Name: "render"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		p := &progress{req: req, token: req.Params.GetProgressToken(), st: st}
		for b.Loop() {
			for range 16 {
				st.Send(stream.Item{Event: "stdout", Data: line})
			}
			items, err := st.Next(ctx, 0)
			if err != nil {
				return nil, nil, err
			}
			for _, it := range items {
				p.item(ctx, it)
			}
			p.flush(ctx)
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	r := stream.New(stream.Config{})
	st, _ = r.Open(ctx, stream.Options{Kind: stream.KindExec, Principal: auth.Principal{TokenID: "t", User: "u"}, Unpaced: true})
	defer st.Close()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {},
	})
	ct, stt := mcp.NewInMemoryTransports()
	ss, _ := srv.Connect(ctx, stt, nil)
	defer ss.Close()
	cs, _ := cl.Connect(ctx, ct, nil)
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "render", Arguments: map[string]any{}}
	params.SetProgressToken("tok")
	b.ReportAllocs()
	if _, err := cs.CallTool(ctx, params); err != nil {
		b.Fatal(err)
	}
}
