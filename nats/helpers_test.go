package fanoutnats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
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
