package fanout

import (
	"context"
	"testing"
)

// A write that failed because the sink's context ended is the runner
// stopping, not a failure to retry, even before the runner's own context,
// a child of the sink's for a batch runner, has been cancelled in turn:
// giveUp says DropShutdown, so OnRetry is not called at the deadline.
func TestGiveUpWhenTheSinkContextEndedBeforeTheRunnersOwn(t *testing.T) {
	sinkCtx, cancel := context.WithCancel(context.Background())
	cancel()
	run := &Runner[int]{ctx: context.Background(), sinkCtx: sinkCtx, retry: DefaultRetryPolicy()}
	reason, err, stop := run.giveUp(context.Canceled, 1)
	if !stop || reason != DropShutdown || err != context.Canceled {
		t.Fatalf("giveUp = %v, %v, %v; want DropShutdown, context.Canceled, true", reason, err, stop)
	}
}
