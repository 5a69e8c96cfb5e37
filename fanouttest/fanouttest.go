// Package fanouttest helps test code that uses [fanout.Broadcaster]: it
// creates broadcasters and watchers that are cleaned up with the test, and
// collects what a watcher received.
//
// The collecting helpers wait at most [HangGuard] for values, so that a bug
// fails the test with a message instead of hanging it. That bound is a guard,
// not a timing assertion.
package fanouttest

import (
	"context"
	"errors"
	"time"

	"github.com/fanout-go/fanout"
)

// HangGuard bounds how long Collect and CollectAll wait before failing the
// test.
var HangGuard = 30 * time.Second

// TB is the subset of testing.TB the helpers use.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// New returns a broadcaster that is shut down when the test ends.
func New[T any](t TB, opts ...fanout.Option) *fanout.Broadcaster[T] {
	t.Helper()
	b := fanout.New[T](opts...)
	t.Cleanup(b.Shutdown)
	return b
}

// Watch registers a watcher on b, failing the test on error, and stops it
// when the test ends.
func Watch[T any](t TB, b *fanout.Broadcaster[T], opts ...fanout.Option) *fanout.Watcher[T] {
	t.Helper()
	w, err := b.Watch(opts...)
	if err != nil {
		t.Fatalf("fanouttest: Watch: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// Collect reads exactly n values from w with its pull API and returns them.
// It fails the test if w closes first or nothing arrives within HangGuard.
func Collect[T any](t TB, w *fanout.Watcher[T], n int) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	out := make([]T, 0, n)
	buf := make([]T, min(max(n, 1), 256))
	for len(out) < n {
		k, err := w.Recv(ctx, buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("fanouttest: got %d of %d values: %v", len(out), n, err)
		}
		out = append(out, buf[:k]...)
	}
	return out
}

// CollectAll reads from w until it closes and returns the values with the
// reason it closed ([fanout.Watcher.Err]). It fails the test if w does not
// close within HangGuard.
func CollectAll[T any](t TB, w *fanout.Watcher[T]) ([]T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	var out []T
	buf := make([]T, 256)
	for {
		k, err := w.Recv(ctx, buf)
		out = append(out, buf[:k]...)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fanouttest: watcher did not close; got %d values", len(out))
		}
		if err != nil {
			return out, err
		}
	}
}

// Drain returns the values queued for w right now, without waiting.
func Drain[T any](w *fanout.Watcher[T]) []T {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out []T
	buf := make([]T, 256)
	for {
		k, err := w.Recv(ctx, buf)
		out = append(out, buf[:k]...)
		if err != nil || k == 0 {
			return out
		}
	}
}

// DrainChan returns the values buffered in ch right now, without waiting, and
// whether ch is closed.
func DrainChan[T any](ch <-chan T) (vals []T, closed bool) {
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return vals, true
			}
			vals = append(vals, v)
		default:
			return vals, false
		}
	}
}
