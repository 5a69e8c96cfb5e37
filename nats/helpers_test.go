package fanoutnats_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// event is the value the tests send: who sent it and its number.
type event struct {
	Src int `json:"src"`
	Seq int `json:"seq"`
}

// hangGuard is how long a test waits for something that should happen
// at once before it fails instead of hanging.
const hangGuard = 30 * time.Second

func guardCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// recv reads n values from w, failing the test if they do not come.
func recv[T any](t testing.TB, w *fanout.Watcher[T], n int) []T {
	t.Helper()
	ctx := guardCtx(t)
	out := make([]T, 0, n)
	buf := make([]T, 256)
	for len(out) < n {
		k, err := w.Recv(ctx, buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("after %d of %d values: %v", len(out), n, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

// recvAsync reads n values from w on a goroutine of its own; receive the
// result with wait, on the test's goroutine.
func recvAsync[T any](w *fanout.Watcher[T], n int) *pending[T] {
	return recvAsyncWithin(w, n, hangGuard)
}

// recvAsyncWithin is recvAsync, failing after guard instead of hangGuard.
func recvAsyncWithin[T any](w *fanout.Watcher[T], n int, guard time.Duration) *pending[T] {
	p := &pending[T]{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		buf := make([]T, 256)
		for len(p.vals) < n {
			k, err := w.Recv(ctx, buf[:min(len(buf), n-len(p.vals))])
			if err != nil {
				p.err = fmt.Errorf("after %d of %d values: %w", len(p.vals), n, err)
				return
			}
			p.vals = append(p.vals, buf[:k]...)
		}
	}()
	return p
}

// recvAllAsync reads n values from each watcher, each on a goroutine of its
// own, failing after guard; receive the results with wait.
func recvAllAsync[T any](ws []*fanout.Watcher[T], n int, guard time.Duration) *pending[[]T] {
	p := &pending[[]T]{done: make(chan struct{})}
	each := make([]*pending[T], len(ws))
	for i, w := range ws {
		each[i] = recvAsyncWithin(w, n, guard)
	}
	go func() {
		defer close(p.done)
		for i, q := range each {
			<-q.done
			p.vals = append(p.vals, q.vals)
			if q.err != nil && p.err == nil {
				p.err = fmt.Errorf("watcher %d: %w", i, q.err)
			}
		}
	}()
	return p
}

// pending is the result of recvAsync.
type pending[T any] struct {
	done chan struct{}
	vals []T
	err  error
}

func (p *pending[T]) wait(t testing.TB) []T {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.vals
}

// recvAll reads n values from each watcher, concurrently (a watcher that
// waits when full holds up the others' producer).
func recvAll[T any](t testing.TB, ws []*fanout.Watcher[T], n int) [][]T {
	t.Helper()
	out := make([][]T, len(ws))
	errs := make(chan error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			buf := make([]T, 256)
			for len(out[i]) < n {
				k, err := w.Recv(ctx, buf[:min(len(buf), n-len(out[i]))])
				if err != nil {
					errs <- fmt.Errorf("watcher %d, after %d of %d values: %w", i, len(out[i]), n, err)
					return
				}
				out[i] = append(out[i], buf[:k]...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// closeWithin closes c, giving up after d: for clean-ups, which must not
// hang when a test failed half-way.
func closeWithin(c closer, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = c.Close(ctx)
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
	}
}

// closer is what the bridges have in common.
type closer interface {
	Close(context.Context) error
	Done() <-chan struct{}
}

// closeAndWait closes c within the hang guard and waits for its goroutine.
func closeAndWait(t testing.TB, c closer) {
	t.Helper()
	if err := c.Close(guardCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitDone(t, c)
}

func waitDone(t testing.TB, c closer) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatal("goroutine did not exit")
	}
}

func seqs(evs []event) []int {
	out := make([]int, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// errorLog collects what a bridge reports to OnError, from any goroutine.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) list() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// jsForwarder forwards the values of a new broadcaster (queue 256) to the
// subject "ev" in JetStream mode, retrying every 20 ms after 500 ms without
// an ack, so that a server restart costs little; frame as in
// ForwardConfig.Frame. It is closed at the end of the test.
func jsForwarder(t *testing.T, nc *nats.Conn, frame int) (*fanout.Broadcaster[event], *fanoutnats.Forwarder[event]) {
	t.Helper()
	out := fanout.New[event](fanout.WithQueueLength(256))
	fwd, err := fanoutnats.Forward(out, nc, fanoutnats.ForwardConfig[event]{
		Subject: "ev", JetStream: true, Frame: frame, Batch: 128, AckTimeout: 500 * time.Millisecond, RetryWait: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(fwd, time.Second) })
	return out, fwd
}

// streamEV starts a server with the stream "EV" capturing "ev", and returns
// a JetStream context on a connection of its own.
func streamEV(t *testing.T) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	return srv, js
}

// checkSameOrderEachOnce checks that every sequence in got is the same, and
// holds the values of seq first..first+n-1 once each: one stream's order
// (a retried publish may be stored after the values sent with it).
func checkSameOrderEachOnce(t *testing.T, got map[string][]event, first, n int) {
	t.Helper()
	var ref []event
	var refName string
	for name, evs := range got {
		if ref == nil {
			ref, refName = evs, name
			continue
		}
		if !slices.Equal(evs, ref) {
			t.Fatalf("%s and %s saw different orders", name, refName)
		}
	}
	sorted := slices.SortedFunc(slices.Values(ref), func(a, b event) int { return a.Seq - b.Seq })
	if len(sorted) != n {
		t.Fatalf("%s got %d values, want %d", refName, len(sorted), n)
	}
	for i, e := range sorted {
		if e.Seq != first+i {
			t.Fatalf("%s, sorted: value %d has seq %d: a value was lost or duplicated", refName, i, e.Seq)
		}
	}
}
