package events

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seriesKey groups the occurrences of one series, as client-go's getKey:
// everything that says what happened to what and who says so, but not the
// note, the name or the time.
type seriesKey struct {
	eventType           string
	action              string
	reason              string
	reportingController string
	reportingInstance   string
	regarding           corev1.ObjectReference
	related             corev1.ObjectReference
}

func keyOf(ev *eventsv1.Event) seriesKey {
	k := seriesKey{
		eventType:           ev.Type,
		action:              ev.Action,
		reason:              ev.Reason,
		reportingController: ev.ReportingController,
		reportingInstance:   ev.ReportingInstance,
		regarding:           ev.Regarding,
	}
	if ev.Related != nil {
		k.related = *ev.Related
	}
	return k
}

// seriesCounters are a broadcaster's counts of series occurrences lost
// after they were merged, shared by the caches of all its sinks.
type seriesCounters struct {
	evicted      atomic.Uint64 // open series evicted
	lostFull     atomic.Uint64 // unwritten occurrences of evicted series
	lostRejected atomic.Uint64 // unwritten occurrences of series whose final write was rejected
	lostStopped  atomic.Uint64 // unwritten occurrences of series open when recording ended
	failures     atomic.Uint64 // failed refresh and finish writes
}

// seriesCache is one sink's series state machine, client-go's recordToSink
// as a [fanout.SinkCorrelator]: the first occurrence of a key is created, the
// second turns the cached first event into a series of count 2 written by
// a patch, and later ones only bump the cached count (merged), which
// refresh and finish write. Correlate runs on the sink runner, refresh and
// finish on the maintenance goroutine; mu guards the cache and every
// cached event, and is never held during a write.
type seriesCache struct {
	mu       sync.Mutex
	size     int
	lru      *simplelru.LRU[seriesKey, *cachedEvent]
	counters *seriesCounters
}

// cachedEvent is a cache entry. Its identity tells the maintenance
// goroutine whether the entry it wrote is still the one cached.
type cachedEvent struct {
	ev *eventsv1.Event
	// version counts the occurrences that changed ev.Series.
	version uint64
	// pending counts the occurrences merged into the series since the
	// last successful refresh or finish write.
	pending uint64
}

var _ fanout.SinkCorrelator[*eventsv1.Event] = (*seriesCache)(nil)

func newSeriesCache(size int, c *seriesCounters) *seriesCache {
	lru, err := simplelru.NewLRU[seriesKey, *cachedEvent](size, nil)
	if err != nil {
		panic("events: " + err.Error()) // unreachable: size is validated
	}
	return &seriesCache{size: size, lru: lru, counters: c}
}

// Correlate decides what the sink writes for ev: a copy of ev to create
// (Count 1), a copy of the series' first event with Series count 2 to
// patch (Count 2), or nothing (Merged).
func (s *seriesCache) Correlate(ev *eventsv1.Event) fanout.Correlation[*eventsv1.Event] {
	// The time the occurrence was recorded, as client-go, whose goroutine
	// per event reads the clock then; the runner may take the event off
	// its queue much later (a slow or retrying sink).
	now := ev.EventTime
	if now.IsZero() {
		now = metav1.MicroTime{Time: time.Now()}
	}
	key := keyOf(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.lru.Get(key); ok {
		c.version++
		if c.ev.Series != nil {
			c.ev.Series.Count++
			c.ev.Series.LastObservedTime = now
			c.pending++
			return fanout.Correlation[*eventsv1.Event]{Value: ev, Count: int(c.ev.Series.Count), Merged: true}
		}
		c.ev.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: now}
		return fanout.Correlation[*eventsv1.Event]{Value: c.ev.DeepCopy(), Count: 2}
	}
	if s.lru.Len() >= s.size {
		if _, old, ok := s.lru.RemoveOldest(); ok && old.ev.Series != nil {
			s.counters.evicted.Add(1)
			s.counters.lostFull.Add(old.pending)
		}
	}
	c := &cachedEvent{ev: ev.DeepCopy()}
	s.lru.Add(key, c)
	return fanout.Correlation[*eventsv1.Event]{Value: c.ev.DeepCopy(), Count: 1}
}

// Observe does nothing: as client-go, the cache keeps the event as the
// client built it, so that server-side changes cannot break the grouping.
func (s *seriesCache) Observe(*eventsv1.Event) {}

// snapshot is a cached event as it was when a maintenance pass chose to
// write it.
type snapshot struct {
	key     seriesKey
	entry   *cachedEvent
	ev      *eventsv1.Event // a private copy to write
	version uint64
	pending uint64
}

func (s *seriesCache) take(key seriesKey, c *cachedEvent) snapshot {
	return snapshot{key: key, entry: c, ev: c.ev.DeepCopy(), version: c.version, pending: c.pending}
}

// current reports whether t's entry is still cached under its key; s.mu
// must be held.
func (s *seriesCache) current(t snapshot) bool {
	c, ok := s.lru.Peek(t.key)
	return ok && c == t.entry
}

// refresh re-writes every open series once, as client-go's
// refreshExistingEventSeries, so that the API server does not expire it;
// a successful write replaces the cached event by the stored one. The
// writes are made without the lock, from a snapshot; an entry evicted or
// replaced meanwhile is left alone, and one that saw new occurrences keeps
// their count. stop ends the pass early.
func (s *seriesCache) refresh(w *sinkAdapter, stop func() bool) {
	s.mu.Lock()
	var todo []snapshot
	for _, key := range s.lru.Keys() {
		if c, _ := s.lru.Peek(key); c.ev.Series != nil {
			todo = append(todo, s.take(key, c))
		}
	}
	s.mu.Unlock()
	for _, t := range todo {
		if stop() {
			return
		}
		stored, err := w.safeWrite(t.ev)
		if err != nil {
			s.counters.failures.Add(1)
			continue // retried or not, the cached event stays as it was
		}
		s.mu.Lock()
		if !s.current(t) {
			// Evicted meanwhile, its unwritten occurrences counted lost;
			// this write delivered the snapshot's.
			subtract(&s.counters.lostFull, t.pending)
		}
		if s.current(t) {
			t.entry.pending -= t.pending
			if stored != nil {
				if t.entry.version != t.version {
					stored.Series = t.entry.ev.Series.DeepCopy()
				}
				t.entry.ev = stored
			}
		}
		s.mu.Unlock()
	}
}

// finish ends idle series, as client-go's finishSeries: a series not seen
// for finishTime is written with its final count and forgotten (also when
// the write is rejected; a write worth retrying is tried again next pass),
// and an event that never became a series is forgotten finishTime after
// it happened. Writes are made without the lock; a series seen again
// meanwhile stays open.
func (s *seriesCache) finish(w *sinkAdapter, stop func() bool) {
	cutoff := time.Now().Add(-finishTime)
	s.mu.Lock()
	var todo []snapshot
	for _, key := range s.lru.Keys() {
		c, _ := s.lru.Peek(key)
		switch {
		case c.ev.Series != nil:
			if c.ev.Series.LastObservedTime.Time.Before(cutoff) {
				todo = append(todo, s.take(key, c))
			}
		case c.ev.EventTime.Time.Before(cutoff):
			s.lru.Remove(key)
		}
	}
	s.mu.Unlock()
	for _, t := range todo {
		if stop() {
			return
		}
		_, err := w.safeWrite(t.ev)
		if err != nil {
			s.counters.failures.Add(1)
			if adapt.Retryable(err) {
				continue
			}
		}
		s.mu.Lock()
		if err == nil && !s.current(t) {
			// Evicted meanwhile (see refresh).
			subtract(&s.counters.lostFull, t.pending)
		}
		if s.current(t) {
			if err == nil {
				t.entry.pending -= t.pending
			}
			if t.entry.version == t.version {
				s.lru.Remove(t.key)
				if err != nil {
					s.counters.lostRejected.Add(t.entry.pending)
				}
			}
		}
		s.mu.Unlock()
	}
}

// abandon forgets every series when recording ends, counting the
// occurrences merged into open series that were never written as lost. It
// must run after the sink runner has exited, so that nothing is merged
// afterwards.
func (s *seriesCache) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.lru.Keys() {
		if c, _ := s.lru.Peek(key); c.ev.Series != nil {
			s.counters.lostStopped.Add(c.pending)
		}
	}
	s.lru.Purge()
}

// subtract takes n from a counter that holds at least n.
func subtract(c *atomic.Uint64, n uint64) {
	if n > 0 {
		c.Add(^(n - 1))
	}
}
