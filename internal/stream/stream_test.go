package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/coder/quartz"

	"github.com/hangar-dev/hangar/internal/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait in these tests.
const waitTimeout = 10 * time.Second

func principal(token string) auth.Principal {
	return auth.Principal{TokenID: token, User: "u-" + token}
}

// newRegistry returns a registry on a mock clock (unless cfg has a clock), so nothing here
// waits for real time: a test moves the clock itself.
func newRegistry(t *testing.T, cfg Config) (*Registry, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	if cfg.Clock == nil {
		cfg.Clock = newClock(t)
	}
	return New(cfg), reg
}

func newClock(t *testing.T) *quartz.Mock { return quartz.NewMock(t).WithLogger(quartz.NoOpLogger) }

// nextCall waits for the trap to catch a call, returning nil once done is closed instead.
func nextCall(t *testing.T, trap *quartz.Trap, done <-chan struct{}) *quartz.Call {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	call, err := trap.Wait(ctx)
	if err != nil {
		select {
		case <-done:
		default:
			t.Errorf("waiting for %s: %v", trap, err)
		}
		return nil
	}
	return call
}

// fire releases a trapped timer and moves the clock to its deadline, so it fires.
func fire(t *testing.T, clk *quartz.Mock, call *quartz.Call) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := call.Release(ctx); err != nil {
		t.Error(err)
		return
	}
	if err := clk.Advance(call.Duration).Wait(ctx); err != nil {
		t.Error(err)
	}
}

// autoPace fires every pace timer of clk as soon as it is set, until the test ends: for tests
// of what a paced stream carries, not of when.
func autoPace(t *testing.T, clk *quartz.Mock) {
	trap := clk.Trap().NewTimer("stream", "pace")
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for call := nextCall(t, trap, stop); call != nil; call = nextCall(t, trap, stop) {
			fire(t, clk, call)
		}
	}()
	t.Cleanup(func() { close(stop); <-done; trap.Close() })
}

func open(t *testing.T, r *Registry, o Options) *Stream {
	t.Helper()
	s, err := r.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestPerTokenAndTotalLimits(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxPerToken: 16, MaxTotal: 20})
	for i := 0; i < 16; i++ {
		open(t, r, Options{Kind: KindExec, Principal: principal("a")})
	}
	_, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a")})
	var le *LimitError
	if !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_TOKEN" || le.Max != 16 {
		t.Fatalf("the 17th stream of one token: %v, want the per-token limit", err)
	}
	if !strings.Contains(err.Error(), "HANGAR_STREAM_MAX_PER_TOKEN") {
		t.Errorf("the error does not name the limit: %v", err)
	}
	// Another token still gets one, up to the total; hangar's own streams count too.
	for i := 0; i < 3; i++ {
		open(t, r, Options{Kind: KindExec, Principal: principal("b")})
	}
	open(t, r, Options{Kind: KindTurnLog})
	_, err = r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("c")})
	if !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_TOTAL" {
		t.Fatalf("past the total: %v, want the total limit", err)
	}
	total, a := r.Count("a")
	if total != 20 || a != 16 {
		t.Fatalf("Count = %d, %d; want 20, 16", total, a)
	}
}

// TestPerUserLimit: one user's streams through many tokens stop at MaxPerUser, with an error
// naming the user and the setting, while another user still gets streams; hangar's own
// streams on the user's behalf are not counted; a closed stream gives its place back.
func TestPerUserLimit(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxPerToken: 2, MaxPerUser: 5, MaxTotal: 100})
	of := func(user, tok string) auth.Principal { return auth.Principal{TokenID: tok, User: user} }
	var last *Stream
	for i := 0; i < 5; i++ {
		last = open(t, r, Options{Kind: KindEvents, Principal: of("mallory", fmt.Sprintf("m%d", i/2))})
	}
	open(t, r, Options{Kind: KindFollower, Principal: of("mallory", "m0"), Own: true})
	_, err := r.Open(context.Background(), Options{Kind: KindEvents, Principal: of("mallory", "m9")})
	var le *LimitError
	if !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_USER" || le.Max != 5 {
		t.Fatalf("mallory's 6th stream, through a fresh token: %v, want the per-user limit", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "mallory") || !strings.Contains(msg, "HANGAR_STREAM_MAX_PER_USER") {
		t.Errorf("the error does not name the user and the setting: %q", msg)
	}
	if n := r.CountUser("mallory"); n != 5 {
		t.Errorf("mallory holds %d streams, want 5 (the refused one and hangar's own not counted)", n)
	}
	open(t, r, Options{Kind: KindEvents, Principal: of("ada", "a0")})
	last.Close()
	open(t, r, Options{Kind: KindEvents, Principal: of("mallory", "m9")})
}

// TestPerGrantLimit: the tokens one OAuth grant issued (a new one at each refresh) share one
// MaxPerToken, and the error says it is the grant's.
func TestPerGrantLimit(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxPerToken: 2})
	refreshed := func(tok string) auth.Principal { return auth.Principal{TokenID: tok, User: "ada", Grant: "gr_1"} }
	open(t, r, Options{Kind: KindExec, Principal: refreshed("t1")})
	open(t, r, Options{Kind: KindExec, Principal: refreshed("t2")})
	_, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: refreshed("t3")})
	var le *LimitError
	if !errors.As(err, &le) || le.Setting != "HANGAR_STREAM_MAX_PER_TOKEN" || !strings.Contains(err.Error(), "grant") {
		t.Fatalf("a third stream of one grant, through its third token: %v, want the per-token limit, said of the grant", err)
	}
	open(t, r, Options{Kind: KindExec, Principal: auth.Principal{TokenID: "t4", User: "ada", Grant: "gr_2"}})
}

func TestCloseFreesPlace(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxPerToken: 1})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close() // a second Close does nothing
	open(t, r, Options{Kind: KindExec, Principal: principal("a")})
}

// drain takes everything until EOF or an end, returning the items and the final error.
func drain(t *testing.T, s *Stream) ([]Item, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out []Item
	for {
		batch, err := s.Next(ctx, 0)
		out = append(out, batch...)
		if err != nil {
			return out, err
		}
	}
}

func join(items []Item) string {
	var b strings.Builder
	for _, it := range items {
		b.Write(it.Data)
	}
	return b.String()
}

func TestOrderAndFinish(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	autoPace(t, clk)
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindExec, Principal: principal("a")})
	var want strings.Builder
	for i := 0; i < 1000; i++ {
		line := strings.Repeat("x", i%50) + "\n"
		want.WriteString(line)
		if !s.Send(Item{Event: "stdout", Data: []byte(line)}) {
			t.Fatal("Send refused")
		}
	}
	s.Finish()
	if s.Send(Item{Data: []byte("late")}) {
		t.Error("Send after Finish was taken")
	}
	items, err := drain(t, s)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("drain: %v, want io.EOF", err)
	}
	if join(items) != want.String() {
		t.Fatal("items came out of order or changed")
	}
}

func TestBigItemsAreSplitOnCharacters(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	autoPace(t, clk)
	r, _ := newRegistry(t, Config{BytesPerSecond: 64 << 20, Clock: clk})
	s := open(t, r, Options{Kind: KindExec})
	text := strings.Repeat("héllo wörld ✓ ", 20000) // multi-byte characters across every boundary
	s.Send(Item{Event: "stdout", Data: []byte(text)})
	s.Finish()
	items, _ := drain(t, s)
	if len(items) < 2 {
		t.Fatalf("a %d-byte item was not split", len(text))
	}
	for _, it := range items {
		if !utf8Valid(it.Data) {
			t.Fatal("a split cut a character in two")
		}
	}
	if join(items) != text {
		t.Fatal("splitting changed the bytes")
	}
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

// TestPacing: the writer gets a stream's bytes at its pace, which the clock measures.
func TestPacing(t *testing.T) {
	t.Parallel()
	const rate = 256 << 10
	clk := newClock(t)
	trap := clk.Trap().NewTimer("stream", "pace")
	defer trap.Close()
	r, _ := newRegistry(t, Config{BytesPerSecond: rate, Clock: clk})
	s := open(t, r, Options{Kind: KindExec})
	// 512 KiB in 1 KiB items, each costing 64 bytes more: (1024+64)*512 bytes at 256 KiB/s.
	const n = 512
	for i := 0; i < n; i++ {
		s.Send(Item{Data: make([]byte, 1024)})
	}
	s.Finish()
	start := clk.Now()
	var items []Item
	var err error
	done := make(chan struct{})
	go func() { items, err = drain(t, s); close(done) }()
	waits := 0
	for call := nextCall(t, trap, done); call != nil; call = nextCall(t, trap, done) {
		fire(t, clk, call)
		waits++
	}
	elapsed := clk.Since(start)
	if !errors.Is(err, io.EOF) || len(join(items)) != n*1024 {
		t.Fatalf("drain: %d bytes, %v", len(join(items)), err)
	}
	burst := float64(s.limiter.Burst())
	want := (float64(n*(1024+MessageOverhead)) - burst) / rate
	if got := elapsed.Seconds(); got < want*0.99 || got > want*1.01 {
		t.Fatalf("sending took %.3fs of the clock, want %.3fs ±1%%", got, want)
	}
	if waits < n/2 {
		t.Errorf("the writer waited for the pace %d times for %d items", waits, n)
	}
}

func TestByteCapKeepsOrderAndMarks(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxBytes: 1000, BytesPerSecond: 64 << 20})
	s := open(t, r, Options{Kind: KindExec})
	for i := 0; i < 30; i++ {
		s.Send(Item{Data: []byte(strings.Repeat("a", 99) + "\n")})
	}
	s.Finish()
	items, err := drain(t, s)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if got := len(join(items)); got != 1000 {
		t.Errorf("sent %d bytes, want exactly the cap of 1000", got)
	}
	if last := items[len(items)-1]; last.Event != EventCapped {
		t.Errorf("the last item is %q, want the cap marker", last.Event)
	}
	capped, dropped := s.Capped()
	if !capped || dropped != 2000 {
		t.Errorf("Capped = %v, %d; want true, 2000", capped, dropped)
	}
}

func TestEndReasons(t *testing.T) {
	t.Parallel()
	r, reg := newRegistry(t, Config{})
	ctx := context.Background()
	s := open(t, r, Options{Kind: KindExec, Principal: principal("a"), Sandbox: "box"})
	other := open(t, r, Options{Kind: KindExec, Principal: principal("a"), Sandbox: "other"})
	s.Send(Item{Data: []byte("pending")})
	r.EndSandbox("box", ReasonDestroyed)
	if _, err := s.Next(ctx, 0); !isEnded(err, ReasonDestroyed) {
		t.Fatalf("Next after EndSandbox = %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done is not closed")
	}
	s.End(ReasonClient) // the first reason wins
	if s.Reason() != ReasonDestroyed {
		t.Fatalf("Reason = %s", s.Reason())
	}
	if other.Reason() != "" {
		t.Fatal("another sandbox's stream ended")
	}
	s.Close()
	if got := testutil.ToFloat64(r.m.closed.WithLabelValues("exec", "destroyed")); got != 1 {
		t.Errorf(`hangar_streams{kind="exec",reason="destroyed"} = %v`, got)
	}

	r.Shutdown()
	if _, err := other.Next(ctx, 0); !isEnded(err, ReasonShutdown) {
		t.Fatalf("Next after Shutdown = %v", err)
	}
	if _, err := r.Open(ctx, Options{Kind: KindExec}); !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("Open after Shutdown = %v", err)
	}
	other.Close()
	if n, _ := testutil.GatherAndCount(reg, "hangar_streams_open"); n == 0 {
		t.Error("hangar_streams_open not exported")
	}
	if got := testutil.ToFloat64(r.m.open.WithLabelValues("exec")); got != 0 {
		t.Errorf("hangar_streams_open{exec} = %v after closing everything", got)
	}
}

func isEnded(err error, reason Reason) bool {
	var e *Ended
	return errors.As(err, &e) && e.Reason == reason
}

func TestRecheckEndsRevokedTokens(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	revoked := map[string]bool{}
	calls := 0
	r, _ := newRegistry(t, Config{Check: func(_ context.Context, p auth.Principal) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if revoked[p.TokenID] {
			return auth.ErrRevoked
		}
		return nil
	}})
	a1 := open(t, r, Options{Kind: KindExec, Principal: principal("a")})
	a2 := open(t, r, Options{Kind: KindEvents, Principal: principal("a")})
	b := open(t, r, Options{Kind: KindExec, Principal: principal("b")})
	own := open(t, r, Options{Kind: KindTurnLog})
	r.recheck(context.Background())
	if a1.Reason() != "" || b.Reason() != "" {
		t.Fatal("a recheck of valid tokens ended a stream")
	}
	mu.Lock()
	revoked["a"] = true
	calls = 0
	mu.Unlock()
	r.recheck(context.Background())
	if a1.Reason() != ReasonRevoked || a2.Reason() != ReasonRevoked {
		t.Errorf("after revoking a: %s, %s", a1.Reason(), a2.Reason())
	}
	if b.Reason() != "" || own.Reason() != "" {
		t.Error("revoking a ended another token's or hangar's own stream")
	}
	if calls != 2 {
		t.Errorf("recheck called Check %d times, want once per token", calls)
	}
}

func TestRecheckIgnoresStoreErrors(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{Check: func(context.Context, auth.Principal) error { return errors.New("database is down") }})
	s := open(t, r, Options{Kind: KindExec, Principal: principal("a")})
	r.recheck(context.Background())
	if s.Reason() != "" {
		t.Fatal("a store error ended a stream")
	}
}

func TestRunRechecks(t *testing.T) {
	t.Parallel()
	revoked := make(chan struct{})
	clk := newClock(t)
	trap := clk.Trap().NewTicker("stream", "recheck")
	defer trap.Close()
	r, _ := newRegistry(t, Config{Recheck: 10 * time.Second, Clock: clk, Check: func(context.Context, auth.Principal) error {
		select {
		case <-revoked:
			return auth.ErrRevoked
		default:
			return nil
		}
	}})
	s := open(t, r, Options{Kind: KindExec, Principal: principal("a")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	call := nextCall(t, trap, done)
	if call.Duration != 10*time.Second {
		t.Fatalf("Run ticks every %s, want the configured 10s", call.Duration)
	}
	close(revoked)
	fire(t, clk, call)
	select {
	case <-s.Done():
	case <-time.After(waitTimeout):
		t.Fatal("Run did not end the revoked token's stream")
	}
}

func TestLifetime(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	r, _ := newRegistry(t, Config{MaxLifetime: time.Hour, Clock: clk})
	events := open(t, r, Options{Kind: KindEvents, Lifetime: true})
	exec := open(t, r, Options{Kind: KindExec})
	clk.Advance(59 * time.Minute)
	r.recheck(context.Background())
	if events.Reason() != "" {
		t.Fatal("ended before its lifetime")
	}
	clk.Advance(time.Minute)
	r.recheck(context.Background())
	if events.Reason() != ReasonLifetime || exec.Reason() != "" {
		t.Fatalf("after the lifetime: events %q, exec %q", events.Reason(), exec.Reason())
	}
}

func TestQueueBound(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	r, _ := newRegistry(t, Config{QueueBytes: 10 << 10, Clock: clk})
	// The writer took something a moment ago: output outran the pace.
	fast := open(t, r, Options{Kind: KindExec})
	for i := 0; i < 100 && fast.Send(Item{Data: make([]byte, 1024)}); i++ {
	}
	if fast.Reason() != ReasonLimit {
		t.Fatalf("overflow with a writer keeping up: %q, want limit", fast.Reason())
	}
	// The writer has taken nothing for a while: the client stopped reading.
	stalled := open(t, r, Options{Kind: KindExec})
	clk.Advance(5 * time.Second)
	for i := 0; i < 100 && stalled.Send(Item{Data: make([]byte, 1024)}); i++ {
	}
	if stalled.Reason() != ReasonSlow {
		t.Fatalf("overflow with a stalled writer: %q, want slow", stalled.Reason())
	}
}

func TestIdleAndContext(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("stream", "idle")
	defer trap.Close()
	r, _ := newRegistry(t, Config{Clock: clk})
	s := open(t, r, Options{Kind: KindExec})
	type result struct {
		batch []Item
		err   error
	}
	got := make(chan result, 1)
	go func() {
		batch, err := s.Next(context.Background(), 10*time.Second)
		got <- result{batch, err}
	}()
	fire(t, clk, nextCall(t, trap, nil))
	if res := <-got; res.err != nil || len(res.batch) != 0 {
		t.Fatalf("Next on an idle stream = %v, %v; want an empty batch", res.batch, res.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context = %v", err)
	}
}

func TestMetricsAndSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	r, reg := newRegistry(t, Config{Tracer: tp.Tracer("test")})
	s, err := r.Open(context.Background(), Options{Kind: KindExec, Principal: principal("a"), Sandbox: "box"})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.m.open.WithLabelValues("exec")); got != 1 {
		t.Errorf("hangar_streams_open{exec} = %v, want 1", got)
	}
	s.Send(Item{Data: []byte("hello")})
	s.Finish()
	drain(t, s)
	s.Close()
	if got := testutil.ToFloat64(r.m.bytes.WithLabelValues("exec")); got != 5 {
		t.Errorf("hangar_stream_bytes{exec} = %v, want 5", got)
	}
	if got := testutil.ToFloat64(r.m.closed.WithLabelValues("exec", "done")); got != 1 {
		t.Errorf(`hangar_streams{exec,done} = %v, want 1`, got)
	}
	if n, err := testutil.GatherAndCount(reg, "hangar_stream_first_output_seconds"); err != nil || n != 1 {
		t.Errorf("first output histogram: %d series, %v", n, err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "stream exec" {
		t.Fatalf("spans = %v", spans)
	}
	attrs := map[string]string{}
	for _, a := range spans[0].Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["hangar.stream.reason"] != "done" || attrs["hangar.stream.bytes"] != "5" || attrs["hangar.sandbox"] != "box" {
		t.Errorf("span attributes = %v", attrs)
	}
}

// TestSendWaitSlowsTheProducer: a producer using SendWait past the queue's bound waits for the
// writer instead of ending the stream, and every byte arrives in order.
func TestSendWaitSlowsTheProducer(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	// The producer waiting for room starts a stall timer: the writer takes only then, so it is
	// always slower than the producer.
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	r, _ := newRegistry(t, Config{QueueBytes: 4 << 10, Clock: clk})
	s := open(t, r, Options{Kind: KindExec, Unpaced: true})
	var want strings.Builder
	ok := true
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 2000 && ok; i++ {
			line := strings.Repeat("y", i%100) + "\n"
			want.WriteString(line)
			ok = s.SendWait(context.Background(), Item{Data: []byte(line)})
		}
		s.Finish()
	}()
	var got strings.Builder
	waits := 0
	for call := nextCall(t, trap, done); call != nil; call = nextCall(t, trap, done) {
		waits++
		call.MustRelease(context.Background())
		batch, err := s.Next(context.Background(), 0)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for _, it := range batch {
			got.Write(it.Data)
		}
	}
	rest, err := drain(t, s)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("Next: %v", err)
	}
	got.WriteString(join(rest))
	if !ok {
		t.Fatal("SendWait refused an item")
	}
	if got.String() != want.String() || s.Reason() != "" {
		t.Fatalf("got %d bytes (want %d), reason %q", got.Len(), want.Len(), s.Reason())
	}
	if waits < 10 {
		t.Errorf("the producer waited for room %d times; the queue's bound did not hold it back", waits)
	}
}

// TestSendWaitStall: a writer that takes nothing for Stall ends the stream (slow) and releases
// the producer.
func TestSendWaitStall(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	r, _ := newRegistry(t, Config{QueueBytes: 1 << 10, Stall: 30 * time.Second, Clock: clk})
	s := open(t, r, Options{Kind: KindExec})
	ok := true
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100 && ok; i++ {
			ok = s.SendWait(context.Background(), Item{Data: make([]byte, 100)})
		}
	}()
	call := nextCall(t, trap, done)
	if call == nil || call.Duration != 30*time.Second {
		t.Fatalf("the full queue's producer waits %v, want the stall of 30s", call)
	}
	fire(t, clk, call)
	<-done
	if ok || s.Reason() != ReasonSlow {
		t.Fatalf("SendWait to a stalled writer: ok %v, reason %q; want the stream ended slow", ok, s.Reason())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2 := open(t, r, Options{Kind: KindExec})
	for i := 0; i < 20; i++ {
		s2.SendWait(ctx, Item{Data: make([]byte, 100)})
	}
	if s2.Reason() != "" {
		t.Errorf("a cancelled SendWait ended the stream: %q", s2.Reason())
	}
}

func TestFinalItemPassesTheCap(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{MaxBytes: 100, BytesPerSecond: 64 << 20})
	s := open(t, r, Options{Kind: KindProcess})
	s.Send(Item{Data: make([]byte, 300)})
	s.Send(Item{Event: "end", Data: []byte(`{"exit_code":0}`), Final: true})
	s.Finish()
	items, err := drain(t, s)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if last := items[len(items)-1]; last.Event != "end" {
		t.Fatalf("the last item is %q: the end was lost to the cap", last.Event)
	}
	if _, dropped := s.Capped(); dropped != 200 {
		t.Errorf("dropped = %d, want 200", dropped)
	}
}

// TestEndReleasesSendWait: a producer waiting for room returns false as soon as the stream is
// ended (the client went away), without waiting out the stall.
func TestEndReleasesSendWait(t *testing.T) {
	t.Parallel()
	clk := newClock(t)
	trap := clk.Trap().NewTimer("queue", "stall")
	defer trap.Close()
	r, _ := newRegistry(t, Config{QueueBytes: 1 << 10, Clock: clk})
	s := open(t, r, Options{Kind: KindExec})
	ok := make(chan bool, 1)
	go func() {
		sent := true
		for i := 0; i < 100 && sent; i++ {
			sent = s.SendWait(context.Background(), Item{Data: make([]byte, 100)})
		}
		ok <- sent
	}()
	call := nextCall(t, trap, nil)
	if call == nil {
		t.Fatal("the producer never waited for room")
	}
	if err := call.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.End(ReasonClient)
	select {
	case sent := <-ok:
		if sent {
			t.Fatal("SendWait on an ended stream reported the item sent")
		}
	case <-time.After(waitTimeout):
		t.Fatal("End did not release the waiting producer")
	}
	if s.Reason() != ReasonClient {
		t.Errorf("Reason = %q, want client", s.Reason())
	}
}

// TestJSONItemsAreNotSplit: a JSON item is one value (an event of an events stream, up to a
// run-log line's 1 MiB): cut in parts, each part would be a message that is not JSON.
func TestJSONItemsAreNotSplit(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{})
	s := open(t, r, Options{Kind: KindEvents, Unpaced: true})
	data := []byte(`{"data":"` + strings.Repeat("x", 200<<10) + `"}`)
	s.Send(Item{ID: "1", Data: data, JSON: true})
	s.Finish()
	items, _ := drain(t, s)
	if len(items) != 1 || string(items[0].Data) != string(data) || items[0].ID != "1" {
		t.Fatalf("a %d-byte JSON item came out as %d items", len(data), len(items))
	}
}

// TestFailedEndsEventStreams: a failed sandbox ends its event streams, not those reading from
// its daemon (they end by themselves, saying more), and tells an event stream's producer
// instead where it asked to be told; an event stream finished with a reason sends what is
// queued, then ends with that reason.
func TestFailedEndsEventStreams(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, Config{})
	ctx := context.Background()
	events := open(t, r, Options{Kind: KindEvents, Principal: principal("a"), Sandbox: "box"})
	exec := open(t, r, Options{Kind: KindExec, Principal: principal("a"), Sandbox: "box"})
	r.EndSandbox("box", ReasonFailed)
	if _, err := events.Next(ctx, 0); !isEnded(err, ReasonFailed) {
		t.Errorf("the events stream's Next after a failure = %v, want ended failed", err)
	}
	if exec.Reason() != "" {
		t.Errorf("the exec stream ended (%s): its daemon's stream says how", exec.Reason())
	}
	events.Close()
	exec.Close()

	told := make(chan struct{}, 1)
	fed := open(t, r, Options{Kind: KindEvents, Principal: principal("a"), Sandbox: "box", SandboxFailed: func() { told <- struct{}{} }})
	r.EndSandbox("box", ReasonFailed)
	select {
	case <-told:
	default:
		t.Error("SandboxFailed was not called")
	}
	if fed.Reason() != "" {
		t.Errorf("a stream whose producer is told of the failure ended (%s)", fed.Reason())
	}
	fed.Close()

	fin := open(t, r, Options{Kind: KindEvents, Principal: principal("a"), Sandbox: "box"})
	defer fin.Close()
	fin.Send(Item{Data: []byte("last")})
	fin.FinishWith(ReasonFailed)
	if items, err := fin.Next(ctx, 0); err != nil || len(items) != 1 || string(items[0].Data) != "last" {
		t.Fatalf("Next after FinishWith = %v, %v; want the queued item", items, err)
	}
	if _, err := fin.Next(ctx, 0); !isEnded(err, ReasonFailed) {
		t.Errorf("Next once all was sent = %v, want ended failed", err)
	}
}
