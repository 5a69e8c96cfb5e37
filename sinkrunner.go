package fanout

import (
	"context"

	"github.com/fanout-go/fanout/internal/guard"
)

// valueSink adapts a [Sink] to the runner's batch write loop: one value a
// batch, Create or Update as the correlation says, keeping what the sink
// returned for the correlator. Owned by the runner's goroutine.
type valueSink[T any] struct {
	sink   Sink[T]
	repeat bool
	stored T
	one    []T
}

// Write stores batch[0] with Create, or Update for a repeat.
func (s *valueSink[T]) Write(ctx context.Context, batch []T) (int, error) {
	var err error
	if s.repeat {
		s.stored, err = s.sink.Update(ctx, batch[0])
	} else {
		s.stored, err = s.sink.Create(ctx, batch[0])
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// write correlates the value of one (a slice of length 1 in the runner's
// buffer) and writes it to s's sink with the runner's write loop: after a
// failure the tries are counted first, then a pause that Stop or Shutdown
// cut short ends the value (cut is then true).
func (run *Runner[T]) write(s *valueSink[T], c SinkCorrelator[T], one []T) (cut bool) {
	res, ok := run.correlate(c, one)
	if !ok {
		return false
	}
	return run.writeValue(s, c, res.Value, res.Count)
}

// writeValue writes v, occurrence count of its key (a repeat, written with
// Update, when above 1), to s's sink with the runner's write loop, and
// passes what the sink stored to c's Observe.
func (run *Runner[T]) writeValue(s *valueSink[T], c SinkCorrelator[T], v T, count int) (cut bool) {
	s.repeat = count > 1
	s.one[0] = v
	n, cut := run.writeBatch(s, s.one)
	clear(s.one)
	if n == 1 && c != nil {
		// The value is stored; a correlator function that panics
		// here only loses the repeat's reference.
		stored := s.stored
		_ = guard.Call(func() { c.Observe(stored) })
	}
	var zero T
	s.stored = zero
	return cut
}

// correlate passes the value of one through c and reports whether there
// is a value to write: not when the spam filter skipped it, c merged it,
// or c panicked.
func (run *Runner[T]) correlate(c SinkCorrelator[T], one []T) (Correlation[T], bool) {
	v := one[0]
	res := Correlation[T]{Value: v, Count: 1}
	if c != nil {
		if err := guard.Call(func() { res = c.Correlate(v) }); err != nil {
			run.drop(DropRejected, one, err)
			return res, false
		}
	}
	switch {
	case res.Skip:
		run.drop(DropSpam, one, nil)
		return res, false
	case res.Merged:
		run.addMerged()
		return res, false
	}
	return res, true
}

// correlateFor is the prepare function of a sink runner with several
// writers: it passes each value through c, on the runner's goroutine, in
// order (so that c decides exactly as with one writer), and keys the value
// to write by key, or by the key c counted it under ([Correlation].Key)
// when key is nil. A key function that panics drops the value
// (DropPanic).
func (run *Runner[T]) correlateFor(c SinkCorrelator[T], key func(T) string) func(T) (prepared[T], bool) {
	one := make([]T, 1)
	return func(v T) (prepared[T], bool) {
		one[0] = v
		res, ok := run.correlate(c, one)
		clear(one)
		if !ok {
			return prepared[T]{}, false
		}
		p := prepared[T]{v: res.Value, key: res.Key, count: res.Count}
		if key != nil {
			p.key, ok = run.keyOf(key, res.Value)
		}
		return p, ok
	}
}
