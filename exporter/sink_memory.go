package exporter

import (
	"context"
	"fmt"
	"sync"
)

// DefaultMemoryLimit is the most records an inMemory receiver keeps when
// its limit is not set.
const DefaultMemoryLimit = 1000

// InMemoryConfig configures an inMemory receiver: kubernetes-event-exporter's
// sink for tests and programs that embed the exporter, which keeps the
// records in memory. Theirs keeps every record, without bound; this one
// keeps the last Limit, so that a configuration that names it cannot run
// out of memory.
type InMemoryConfig struct {
	// Limit is the most records kept (default [DefaultMemoryLimit]):
	// beyond it, storing a record evicts the oldest.
	Limit int `yaml:"limit"`
	// Ref is the sink built for the receiver, set when the exporter
	// builds it ([NewPipeline]), as kubernetes-event-exporter sets its
	// Ref: a program reads the records from it.
	Ref *MemorySink `yaml:"-"`
}

func (c *InMemoryConfig) validate() []string {
	if c.Limit < 0 {
		return []string{fmt.Sprintf("inMemory.limit %d is negative (0 is the default, %d)", c.Limit, DefaultMemoryLimit)}
	}
	if c.Limit == 0 {
		c.Limit = DefaultMemoryLimit
	}
	return nil
}

// MemoryRecord is a record a [MemorySink] keeps: the occurrence and its
// record as the receiver's format and layout make it.
type MemoryRecord struct {
	// Occurrence is the occurrence stored; it must not be modified.
	Occurrence *Occurrence
	// Record is its record (JSON).
	Record []byte
}

// MemorySink keeps the records of the last occurrences written to it, up
// to a limit, for a program or a test to read. It never fails but for an
// occurrence that cannot be encoded ([Permanent]). Its methods are safe
// for concurrent use.
type MemorySink struct {
	limit  int
	encode Encoder

	mu      sync.Mutex // guards what follows
	ring    []MemoryRecord
	next    int // where the next record goes once ring is full
	evicted uint64
}

// NewMemorySink returns a sink that keeps the last limit records (0:
// [DefaultMemoryLimit]) made by enc (nil: the default record).
func NewMemorySink(limit int, enc Encoder) *MemorySink {
	if limit <= 0 {
		limit = DefaultMemoryLimit
	}
	return &MemorySink{limit: limit, encode: enc}
}

// Write keeps the records of the batch, evicting the oldest beyond the
// limit.
func (s *MemorySink) Write(_ context.Context, batch []*Occurrence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return encodeEach(batch, s.encode, func(_ int, o *Occurrence, rec []byte) {
		r := MemoryRecord{Occurrence: o, Record: rec}
		if len(s.ring) < s.limit {
			s.ring = append(s.ring, r)
			return
		}
		s.ring[s.next] = r
		s.next = (s.next + 1) % s.limit
		s.evicted++
	})
}

// Records returns the records kept, oldest first.
func (s *MemorySink) Records() []MemoryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]MemoryRecord, 0, len(s.ring))
	return append(append(out, s.ring[s.next:]...), s.ring[:s.next]...)
}

// Evicted returns how many records were evicted to make room for newer
// ones.
func (s *MemorySink) Evicted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}

// Close does nothing: the records stay readable.
func (s *MemorySink) Close(context.Context) error { return nil }
