package fanout

import (
	"context"
	"testing"
)

// Shutdown's context bounds only its wait: a runner that has ended by the
// time Shutdown looks counts as ended, even with the context done too (a
// select on both chose at random, so Shutdown returned nil or the
// context's error for the same state).
func TestWaitDonePrefersAnEndedRunnerToAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	close(done)
	for range 100 {
		if !waitDone(ctx, done) {
			t.Fatal("waitDone reported the context's end, with the runner ended")
		}
	}
	if waitDone(ctx, make(chan struct{})) {
		t.Fatal("waitDone reported a runner that has not ended as ended")
	}
}
