package fanouttest

import (
	"context"
	"sync"
	"time"
)

// Sink is a fake [fanout.Sink] that records every write, for tests of
// [fanout.Recorder] sink runners. The zero value stores every value as it
// is. It is safe for concurrent use.
type Sink[T any] struct {
	// Fail, if set, decides each write's error: op is "create" or
	// "update", and attempt counts this write among the writes of values
	// with the same Key (1 for the first).
	Fail func(op string, v T, attempt int) error
	// Key, if set, groups the writes of one value for Fail's attempt
	// count; nil counts every write as the same value.
	Key func(T) string
	// Store, if set, returns what a successful write stores (and the
	// runner passes to the correlator's Observe), for example v with an
	// ID; nil stores v.
	Store func(op string, v T) T
	// Block, if set, is received from before each write returns, so that
	// the test decides when writes end; a write whose context ends first
	// fails with the context's error.
	Block chan struct{}
	// Panic, if set, makes writes of values for which it returns true
	// panic instead.
	Panic func(v T) bool

	mu    sync.Mutex
	calls []SinkCall[T]
}

// SinkCall is one write a [Sink] received.
type SinkCall[T any] struct {
	// Op is "create" or "update".
	Op string
	// Value is the value written.
	Value T
	// At is when the write ended (the fake clock inside a testing/synctest
	// bubble).
	At time.Time
	// Err is the write's error, nil if it succeeded.
	Err error
}

// Create records a create.
func (s *Sink[T]) Create(ctx context.Context, v T) (T, error) { return s.write(ctx, "create", v) }

// Update records an update.
func (s *Sink[T]) Update(ctx context.Context, v T) (T, error) { return s.write(ctx, "update", v) }

func (s *Sink[T]) write(ctx context.Context, op string, v T) (T, error) {
	if s.Panic != nil && s.Panic(v) {
		panic("fanouttest: sink panics, as told")
	}
	var zero T
	if s.Block != nil {
		select {
		case <-s.Block:
		case <-ctx.Done():
			s.record(op, v, ctx.Err())
			return zero, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.Fail != nil {
		err = s.Fail(op, v, s.attempt(v))
	}
	s.calls = append(s.calls, SinkCall[T]{Op: op, Value: v, At: time.Now(), Err: err})
	if err != nil {
		return zero, err
	}
	if s.Store != nil {
		return s.Store(op, v), nil
	}
	return v, nil
}

// attempt counts the earlier writes of v's key, plus one. Caller holds mu.
func (s *Sink[T]) attempt(v T) int {
	if s.Key == nil {
		return len(s.calls) + 1
	}
	k, n := s.Key(v), 1
	for _, c := range s.calls {
		if s.Key(c.Value) == k {
			n++
		}
	}
	return n
}

func (s *Sink[T]) record(op string, v T, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, SinkCall[T]{Op: op, Value: v, At: time.Now(), Err: err})
}

// Calls returns the writes received so far, in order.
func (s *Sink[T]) Calls() []SinkCall[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SinkCall[T](nil), s.calls...)
}

// Written returns the values of the successful writes so far, in order.
func (s *Sink[T]) Written() []T {
	var out []T
	for _, c := range s.Calls() {
		if c.Err == nil {
			out = append(out, c.Value)
		}
	}
	return out
}
