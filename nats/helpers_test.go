package fanoutnats_test

import (
	"context"
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
