package fanoutnats

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fanout-go/fanout/internal/guard"
)

// reporter hands each failure to the user's OnError callback and logger.
// A panic in either is contained and counted: the bridge goes on. A
// durable consumer reports from its acknowledger's goroutine too (an
// acknowledgement that failed or went unconfirmed): mu keeps the calls
// from overlapping, so that a callback needs no lock of its own.
type reporter struct {
	onError func(error)
	logger  *slog.Logger
	panics  atomic.Uint64
	mu      sync.Mutex
}

func (r *reporter) report(e *Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logger != nil {
		r.safe(func() {
			attrs := []slog.Attr{slog.String("op", e.Op), slog.String("err", fmt.Sprint(e.Err))}
			if e.Subject != "" {
				attrs = append(attrs, slog.String("subject", e.Subject))
			}
			if e.Sequence != 0 {
				attrs = append(attrs, slog.Uint64("stream_seq", e.Sequence))
			}
			r.logger.LogAttrs(context.Background(), slog.LevelWarn, "fanoutnats: "+e.Op+" failed", attrs...)
		})
	}
	if r.onError != nil {
		r.safe(func() { r.onError(e) })
	}
}

// safe runs f, counting a panic instead of letting it end the goroutine.
func (r *reporter) safe(f func()) {
	if guard.Call(f) != nil {
		r.panics.Add(1)
	}
}
