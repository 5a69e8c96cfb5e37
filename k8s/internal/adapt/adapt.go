// Package adapt holds what the record and events packages share: client-go's
// classification of write errors and the mapping of the core recorder's
// counters to [eventstats.Stats], the formatting of a recorded message,
// and the reference to the object an event is about.
package adapt

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/eventstats"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
)

// Retryable reports whether client-go retries a sink write that failed
// with err: a request that could not be built and any API status error
// are final; everything else (a transport error, an unexpected object) is
// retried. Like client-go it looks at err's own type, not at wrapped
// errors.
func Retryable(err error) bool {
	switch err.(type) {
	case *restclient.RequestConstructionError, *apierrors.StatusError:
		return false
	}
	return true
}

// Counters are the counts an adapter keeps beside the core recorder's:
// events refused before they were queued.
type Counters struct {
	// Invalid counts events that could not be built.
	Invalid atomic.Uint64
	// Stopped counts events recorded after shutdown.
	Stopped atomic.Uint64
}

// Stats combines the core recorder's counters with the adapter's.
func Stats(rs fanout.RecorderStats, c *Counters) eventstats.Stats {
	return eventstats.Stats{
		Recorded:        rs.Recorded,
		Invalid:         c.Invalid.Load(),
		Refused:         rs.Refused + c.Stopped.Load(),
		Sinks:           rs.Runners,
		Queued:          rs.Queued,
		Written:         rs.Written,
		Merged:          rs.Merged,
		MergedLost:      rs.MergedLost,
		Failures:        rs.Failures,
		DroppedFull:     rs.DroppedFull,
		DroppedSpam:     rs.DroppedSpam,
		DroppedRejected: rs.DroppedRejected,
		DroppedRetries:  rs.DroppedRetries,
		DroppedShutdown: rs.DroppedShutdown,
	}
}

// Sprintf is fmt.Sprintf(format, args...), which it returns unless there
// is nothing to format: a format without a verb and no arguments is
// returned as is, without the copy fmt makes. The two are equal.
func Sprintf(format string, args []any) string {
	if len(args) == 0 && strings.IndexByte(format, '%') < 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
