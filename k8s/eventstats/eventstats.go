// Package eventstats defines what the adapter's event broadcasters
// ([github.com/fanout-go/fanout/k8s/record] and
// [github.com/fanout-go/fanout/k8s/events]) count: [Stats], returned by
// their Stats methods.
//
// client-go drops events in several places without a trace: a full queue,
// the spam filter, an exhausted retry budget, an event it cannot build.
// Every one of them is counted here, by cause.
//
// The package uses only the standard library. To export the counters to
// Prometheus, register the collector of the separate module
// [github.com/fanout-go/fanout/k8s/metrics]; a program that does not import
// it does not link Prometheus.
package eventstats

// Stats is a snapshot of an event broadcaster's counters. Counters only
// grow, but Merged; Queued and Sinks are current values. Every event given
// to a recorder ends up, for each sink, in exactly one of Written, Merged
// or a Dropped* counter once it has left the queue, or in Invalid or
// Refused before it was queued: an occurrence merged into a series that
// is lost later moves from Merged to a Dropped* counter, so that Merged
// can go down, and MergedLost counts those moves.
type Stats struct {
	// Recorded counts events the recorders accepted and queued.
	Recorded uint64
	// Invalid counts events refused before queueing because they could not
	// be built: no object reference, an unsupported type, a nil object.
	Invalid uint64
	// Refused counts events refused because the broadcaster was shut down.
	Refused uint64
	// Sinks is the number of sinks and watchers still running.
	Sinks int
	// Queued is the number of events waiting in sink and watcher queues.
	Queued int
	// Written counts events a sink stored (or a watcher or logger took).
	Written uint64
	// Merged counts occurrences folded into an earlier event instead of
	// being written on their own (an events.k8s.io series count), less
	// those lost later (MergedLost).
	Merged uint64
	// MergedLost counts merged occurrences whose series was lost later
	// (evicted from a full cache, or its last write failed), moved from
	// Merged to a Dropped* counter. Merged + MergedLost never goes down:
	// it is what the Prometheus collector exports as merged.
	MergedLost uint64
	// Failures counts failed write attempts, retried or not.
	Failures uint64
	// DroppedFull counts events a sink or watcher missed because its queue
	// was full.
	DroppedFull uint64
	// DroppedSpam counts events the spam filter skipped.
	DroppedSpam uint64
	// DroppedRejected counts events the API server rejected (not worth
	// retrying) or whose sink or handler panicked.
	DroppedRejected uint64
	// DroppedRetries counts events that failed every try.
	DroppedRetries uint64
	// DroppedShutdown counts events given up because of a shutdown.
	DroppedShutdown uint64
}

// Dropped returns the number of events lost, all causes together,
// including Invalid and Refused.
func (s Stats) Dropped() uint64 {
	return s.Invalid + s.Refused + s.DroppedFull + s.DroppedSpam + s.DroppedRejected +
		s.DroppedRetries + s.DroppedShutdown
}

// Source is anything with [Stats]: the broadcasters of the record and
// events packages.
type Source interface {
	Stats() Stats
}
