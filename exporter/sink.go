package exporter

import (
	"context"
	"errors"

	"github.com/fanout-go/fanout"
)

// Sink stores occurrences: one per receiver of the configuration. Each sink
// is driven by a runner of its own, whose writers ([Receiver].Writers, any
// receiver may set it) call Write concurrently: a sink's Write must be
// safe for concurrent use (a stream's sink may simply write one batch at a
// time). Close is called once, after every Write has returned.
//
// Adding a sink means implementing Write and Close (see [NewRegistry] to
// make it configurable).
//
// Its Write is the core's [fanout.BatchSink]: Write(ctx, batch) stores the
// occurrences of batch, in order, and returns how many of them, from the
// start, are stored. On an error, the exporter retries batch[n:] as its
// retry policy says, unless the error is [Permanent]: then batch[n] is
// dropped (counted as rejected) and the rest is written. A panic drops
// batch[n] (counted as panic). ctx ends when the exporter gives up
// (shutdown deadline); a write should return promptly then.
type Sink interface {
	fanout.BatchSink[*Occurrence]
	// Close releases the sink's resources once nothing more will be
	// written; ctx bounds it.
	Close(ctx context.Context) error
}

// Marker is implemented by sinks that can tell, after a crash, which
// occurrences they stored after the last checkpoint, so that the exporter
// does not write them twice (the file sink does). The exporter calls Mark
// from its checkpoint goroutine, concurrently with Write.
type Marker interface {
	// Mark returns an opaque position such that every occurrence with
	// [Occurrence.Seq] <= seq that the sink stored lies before it.
	Mark(seq uint64) string
	// Stored returns the keys ([Occurrence.Key]) of the occurrences stored
	// after mark. The exporter calls it once, before the first Write.
	Stored(mark string) (map[string]struct{}, error)
}

// PermanentError marks an error that retrying cannot fix (see [Permanent]).
type PermanentError struct {
	// Err is the error that retrying cannot fix.
	Err error
}

// Error returns Err's message.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the exporter does not retry it: the
// occurrence concerned is dropped and counted as rejected. Permanent(nil)
// is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a [PermanentError].
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
