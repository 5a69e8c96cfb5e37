package fanout

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// Defaults of the [Correlator] stages. They are client-go's
// (k8s.io/client-go/tools/record): a zero field of a stage means its default.
const (
	// DefaultCacheSize is the number of keys each stage's cache keeps.
	DefaultCacheSize = 4096
	// DefaultAggregateMaxKeys is the number of distinct local keys seen in
	// a group within the interval that turns on aggregation.
	DefaultAggregateMaxKeys = 10
	// DefaultAggregateInterval is the longest gap between two values of a
	// group that still counts them together.
	DefaultAggregateInterval = 600 * time.Second
	// DefaultSpamBurst is the number of values a spam key may send at once.
	DefaultSpamBurst = 25
	// DefaultSpamRate is the spam filter's refill rate, in tokens per
	// second: one every 300 seconds, rounded to float32 as client-go's
	// QPS field is, so that a token comes back at the same instant
	// (299.9999927 s).
	DefaultSpamRate = float64(float32(1.0 / 300))
)

// Clock tells the time. [Correlator] and [Recorder] take one so that tests
// can control time; the default is the system clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// CorrelatorConfig configures a [Correlator]: three stages that run in this
// order, each switched off by leaving it nil.
//
//  1. Aggregate: values that share a group key but differ in their local key
//     are combined into one, once enough distinct local keys are seen close
//     together.
//  2. Dedup: a value whose key was seen before is counted as a repeat, so a
//     sink can update the earlier record instead of writing a new one.
//  3. Spam: a token bucket per key limits how many values are written.
//
// This is client-go's EventCorrelator made generic; configured with its key
// functions and the defaults it makes the same decisions.
//
// The functions it holds (the stages' keys, messages, Combine, Count and
// Time, Clone and the Clock) run while the correlator holds its lock, one
// call at a time per correlator: they need not be safe for concurrent use,
// but must not call the same correlator's Correlate or Observe, which would
// wait for that lock forever. A function that panics leaves the correlator
// usable, with nothing half-recorded.
type CorrelatorConfig[T any] struct {
	// Aggregate configures stage 1; nil switches it off.
	Aggregate *AggregateStage[T]
	// Dedup configures stage 2; nil switches it off.
	Dedup *DedupStage[T]
	// Spam configures stage 3; nil switches it off.
	Spam *SpamStage[T]
	// CacheSize bounds each stage's cache, in keys; the least recently
	// used key is forgotten first. Zero means [DefaultCacheSize].
	CacheSize int
	// Clock gives the time for the aggregation window and the token
	// buckets. Nil means the system clock.
	Clock Clock
	// Clone, if set, copies a value. The correlator clones every value it
	// is given before a stage changes it, and every value it remembers, so
	// that a caller changing a value afterwards cannot change its state.
	// Set it when T is a pointer type; leave it nil for plain values.
	Clone func(T) T
}

// AggregateStage configures the aggregation stage of a [Correlator].
type AggregateStage[T any] struct {
	// Key returns the value's group key and its local key within the group
	// (client-go: everything but the message, and the message). Required.
	Key func(T) (group, local string)
	// Combine builds the value written instead of v once the group is
	// aggregated; now is the correlator's clock reading. Nil means v itself.
	// The combined value is counted under the group key by the dedup stage.
	Combine func(v T, now time.Time) T
	// MaxKeys is the number of distinct local keys, each seen within
	// Interval of the previous value of the group, that turns a value into
	// a combined one. Zero means [DefaultAggregateMaxKeys].
	MaxKeys int
	// Interval is the longest gap between consecutive values of a group; a
	// longer gap starts the group afresh. Zero means
	// [DefaultAggregateInterval].
	Interval time.Duration
}

// DedupStage configures the counting stage of a [Correlator]. A repeat is
// handled one of two ways: by default the new value is marked as a repeat
// of the remembered one (Repeat) and written; with Merge, the repeat is
// folded into the remembered record, which is written instead, at once
// for the first WriteFirst occurrences and later by its owner
// ([Correlator.WriteOpen]) for the rest.
type DedupStage[T any] struct {
	// Key identifies identical values (client-go: every field but the
	// timestamps and count). Required, unless AppendKey is set.
	Key func(T) string
	// AppendKey, instead of Key, appends v's key to dst and returns the
	// extended buffer, as strconv's Append functions; it must not keep
	// dst, and an empty result is the key "". The correlator builds each
	// key in a buffer of its own and copies it only to remember a new
	// key, where Key allocates a string per value (a twentieth of
	// recording a repeated events.k8s.io event). Set Key or AppendKey,
	// not both.
	AppendKey func(dst []byte, v T) []byte
	// Repeat returns v marked as occurrence n (n ≥ 2) of the value
	// remembered as prev: typically v with prev's identity and first
	// timestamp, and count n. v is the correlator's own copy (see
	// [CorrelatorConfig].Clone), so Repeat may change it in place and
	// return it; prev is the correlator's record, not to be changed. Nil
	// means v unchanged. Not used with Merge.
	Repeat func(v, prev T, n int) T
	// Count returns the occurrence count a value carries, used for a first
	// occurrence and by [Correlator.Observe]. Nil means 1 for a first
	// occurrence, and the remembered count for Observe. A remembered count
	// of 0 or less is treated as never seen.
	Count func(T) int
	// Merge, if set, folds each repeat into the remembered record: it
	// returns rec marked as n occurrences (n ≥ 2), the latest at last (see
	// Time). rec is the correlator's own copy, so Merge may change it in
	// place and return it (no copy per repeat). A repeat that is written
	// is written as a copy of the merged record, with Count n. client-go's
	// events.k8s.io series: Series{Count: n, LastObservedTime: last}.
	Merge func(rec T, n int, last time.Time) T
	// WriteFirst, with Merge, is how many occurrences of a key are written
	// when they happen; later ones are only merged ([Correlation].Merged)
	// until the owner writes the record ([Correlator.WriteOpen]). A record
	// whose next occurrence will only be merged (one with at least
	// WriteFirst occurrences, or with merged ones not yet written) is
	// open. Zero means every occurrence is written. client-go's series: 2
	// (the first event is created, the second writes the series).
	WriteFirst int
	// Time returns when v occurred: the time Merge gets, and the one
	// [Sweep].IdleFor measures from. Nil, or a zero time, means the
	// correlator's clock when Correlate runs.
	Time func(T) time.Time
}

// SpamStage configures the spam filter of a [Correlator]: a token bucket per
// key. A value is skipped when its key's bucket is empty.
type SpamStage[T any] struct {
	// Key returns the bucket's key (client-go: source, object and type).
	// Required.
	Key func(T) string
	// Burst is the bucket's size. Zero means [DefaultSpamBurst].
	Burst int
	// Rate is the refill rate in tokens per second. Zero means
	// [DefaultSpamRate]; +Inf means never empty.
	Rate float64
}

// Correlation is what [Correlator.Correlate] decided for one value.
type Correlation[T any] struct {
	// Value is the value to write: the input, or the combined value when
	// Aggregated, marked as a repeat when Count > 1 (with a merging dedup
	// stage, a copy of the merged record). When Merged it is the input.
	Value T
	// Count is the number of occurrences so far: 1 for a value to create,
	// more for a repeat whose earlier record a sink should update.
	Count int
	// Key is the key Value is counted under: the group key when
	// Aggregated, else the dedup key ("" without a dedup stage).
	Key string
	// Aggregated reports that Value is a combined value.
	Aggregated bool
	// Skip reports that the spam filter had no token: do not write Value.
	Skip bool
	// Merged reports that the value was folded into an earlier record that
	// is written later (a series count, say): nothing to write now. A sink
	// runner counts it in [RunnerStats].Merged, not as a drop; should the
	// record never be written, the correlator reports the loss (see
	// [LossCounter]). [Correlator] sets it from occurrence
	// [DedupStage].WriteFirst+1 of a key on; merged values skip the spam
	// filter.
	Merged bool
}

// SinkCorrelator decides, for a sink runner, what to write for each value
// (see [Recorder.StartSink]): [Correlator] is the stock implementation,
// and a package may supply its own. The runner calls Correlate once per
// value, in order, on its own goroutine, and Observe with what the sink
// returned after each successful write: on the runner's goroutine, or, with
// several writers ([WithWriters]), on the writers', concurrently with
// Correlate and possibly after later values of the same key were
// correlated. Implementations shared by several runners, or used with
// several writers, must be safe for concurrent use. One that merges values
// ([Correlation].Merged) and may fail to write them later reports those
// losses by implementing [LossReporting].
type SinkCorrelator[T any] interface {
	Correlate(v T) Correlation[T]
	Observe(stored T)
}

// Correlator aggregates similar values, counts repeats and filters spam. It
// is safe for concurrent use; a [Recorder] runner gives each sink its own
// (see [Recorder.StartSink]). It starts no goroutines.
type Correlator[T any] struct {
	mu    sync.Mutex
	clock Clock
	clone func(T) T
	// lazyClock: only the dedup stage may need the time, and its Time
	// function gives it, so Correlate reads the clock only when Time
	// returns zero (a clock reading was a tenth of the cost of a merged
	// repeat in k8s/events BenchmarkSeriesCorrelate).
	lazyClock bool

	agg      *AggregateStage[T]
	aggMax   int
	aggIvl   time.Duration
	aggCache *simplelru.LRU[string, *aggRecord]

	dedup      *DedupStage[T]
	dedupSize  int
	dedupCache *simplelru.LRU[string, *seen[T]]
	keyBuf     []byte      // where AppendKey builds keys (dedupKey)
	seq        uint64      // the last record id given out
	report     LossCounter // nil: losses are not reported
	evicted    uint64      // open records evicted

	spam      *SpamStage[T]
	spamBurst int
	spamRate  rate.Limit
	spamCache *simplelru.LRU[string, *rate.Limiter]
}

// aggRecord is a group's state: its distinct local keys in insertion order
// and when it was last seen.
type aggRecord struct {
	keys  map[string]struct{}
	order []string
	last  time.Time
}

// seen is a dedup record. Entries are updated in place; one whose writes
// are in flight (WriteOpen) is never reused, so that they can settle
// against it after it was forgotten.
type seen[T any] struct {
	key   string // as remembered
	v     T
	count int
	last  time.Time // when the latest occurrence happened
	id    uint64    // unique per record, so that a write in flight can tell it from a successor
	ver   uint64    // counts occurrences, so that a write in flight can tell it saw more
	// pending counts merged occurrences not yet written nor being
	// written; inflight those being written by WriteOpen.
	pending, inflight int
	// gone is set when the record is forgotten while writes are in
	// flight; fate is why, and what their merged values are lost as if
	// they fail (noLoss: not lost).
	gone bool
	fate DropReason
}

// NewCorrelator returns a correlator for cfg, or an error naming the first
// invalid field: a stage without its Key function, a negative size,
// count, interval or rate, or WriteFirst without Merge.
func NewCorrelator[T any](cfg CorrelatorConfig[T]) (*Correlator[T], error) {
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	if size < 0 {
		return nil, fmt.Errorf("fanout: invalid CacheSize %d: must be 0 (default) or more", cfg.CacheSize)
	}
	c := &Correlator[T]{clock: cfg.Clock, clone: cfg.Clone}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	for _, setup := range []func(CorrelatorConfig[T], int) error{c.setupAggregate, c.setupDedup, c.setupSpam} {
		if err := setup(cfg, size); err != nil {
			return nil, err
		}
	}
	c.lazyClock = c.agg == nil && c.spam == nil && c.dedup != nil && c.dedup.Time != nil
	return c, nil
}

func (c *Correlator[T]) setupAggregate(cfg CorrelatorConfig[T], size int) error {
	a := cfg.Aggregate
	if a == nil {
		return nil
	}
	if a.Key == nil {
		return errors.New("fanout: AggregateStage.Key is nil")
	}
	if a.MaxKeys < 0 || a.Interval < 0 {
		return fmt.Errorf("fanout: invalid AggregateStage: MaxKeys %d and Interval %v must not be negative", a.MaxKeys, a.Interval)
	}
	c.agg, c.aggMax, c.aggIvl = a, a.MaxKeys, a.Interval
	if c.aggMax == 0 {
		c.aggMax = DefaultAggregateMaxKeys
	}
	if c.aggIvl == 0 {
		c.aggIvl = DefaultAggregateInterval
	}
	c.aggCache, _ = simplelru.NewLRU[string, *aggRecord](size, nil)
	return nil
}

func (c *Correlator[T]) setupDedup(cfg CorrelatorConfig[T], size int) error {
	d := cfg.Dedup
	if d == nil {
		return nil
	}
	switch {
	case d.Key == nil && d.AppendKey == nil:
		return errors.New("fanout: DedupStage.Key is nil (set Key or AppendKey)")
	case d.Key != nil && d.AppendKey != nil:
		return errors.New("fanout: invalid DedupStage: both Key and AppendKey are set")
	case d.WriteFirst < 0:
		return fmt.Errorf("fanout: invalid DedupStage: WriteFirst %d must not be negative", d.WriteFirst)
	case d.WriteFirst > 0 && d.Merge == nil:
		return errors.New("fanout: invalid DedupStage: WriteFirst needs Merge")
	}
	c.dedup, c.dedupSize = d, size
	c.dedupCache, _ = simplelru.NewLRU[string, *seen[T]](size, nil)
	return nil
}

func (c *Correlator[T]) setupSpam(cfg CorrelatorConfig[T], size int) error {
	s := cfg.Spam
	if s == nil {
		return nil
	}
	if s.Key == nil {
		return errors.New("fanout: SpamStage.Key is nil")
	}
	if s.Burst < 0 || s.Rate < 0 || math.IsNaN(s.Rate) {
		return fmt.Errorf("fanout: invalid SpamStage: Burst %d and Rate %v must not be negative", s.Burst, s.Rate)
	}
	c.spam, c.spamBurst, c.spamRate = s, s.Burst, rate.Limit(s.Rate)
	if c.spamBurst == 0 {
		c.spamBurst = DefaultSpamBurst
	}
	if s.Rate == 0 {
		c.spamRate = rate.Limit(DefaultSpamRate)
	}
	c.spamCache, _ = simplelru.NewLRU[string, *rate.Limiter](size, nil)
	return nil
}

// Correlate runs v through the stages and returns the decision. The stages
// remember v (and the dedup stage remembers its result) even when the spam
// filter then skips it, as client-go does. A record evicted to make room
// for v's is reported lost if it had merged values (see [LossCounter]).
func (c *Correlator[T]) Correlate(v T) Correlation[T] {
	r, l := c.correlate(v)
	c.lose(l)
	return r
}

func (c *Correlator[T]) correlate(v T) (r Correlation[T], l loss) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var now time.Time
	if !c.lazyClock {
		now = c.clock.Now()
	}
	// own reports that v is a private copy. Values are cloned only when
	// a stage changes them, is remembered or written: a merged repeat
	// costs no copy.
	own := c.clone == nil
	scratch := false // r.Key is in c.keyBuf (dedupKey)
	if c.dedup != nil {
		r.Key, scratch = c.dedupKey(v)
	}
	if c.agg != nil {
		if group, ok := c.aggregate(v, now); ok {
			r.Aggregated = true
			r.Key, scratch = group, false
			if c.agg.Combine != nil {
				v, own = c.agg.Combine(c.own(v, own), now), true
			}
		}
	}
	r.Count = 1
	if c.dedup != nil {
		var e *seen[T]
		e, l = c.lookup(r.Key, scratch)
		if scratch {
			r.Key = e.key
		}
		if e.count > 0 {
			return c.repeat(r, e, v, own, now), l
		}
		v, own = c.own(v, own), true
		c.first(e, v, now)
		r.Count = e.count
	}
	r.Value = c.own(v, own)
	r.Skip = c.skip(r.Value, now)
	return r, l
}

// own returns v, cloned unless it is already a private copy.
func (c *Correlator[T]) own(v T, own bool) T {
	if own {
		return v
	}
	return c.clone(v)
}

// skip asks the spam filter for a token for v.
func (c *Correlator[T]) skip(v T, now time.Time) bool {
	if c.spam == nil {
		return false
	}
	k := c.spam.Key(v)
	lim, ok := c.spamCache.Get(k)
	if !ok {
		lim = rate.NewLimiter(c.spamRate, c.spamBurst)
	}
	c.spamCache.Add(k, lim)
	return !lim.AllowN(now, 1)
}

// dedupKey returns v's dedup key, and whether it is built in c.keyBuf
// (AppendKey): such a key is only valid until the next call, and lookup
// keeps a copy of it. Caller holds c.mu.
func (c *Correlator[T]) dedupKey(v T) (key string, scratch bool) {
	if c.dedup.Key != nil {
		return c.dedup.Key(v), false
	}
	if c.keyBuf == nil {
		c.keyBuf = make([]byte, 0, 128)
	}
	b := c.dedup.AppendKey(c.keyBuf[:0], v)
	if len(b) == 0 {
		return "", false
	}
	if &b[0] != &c.keyBuf[:1][0] {
		// Grown past our buffer (kept, so that a long key's repeats
		// allocate nothing either), or a buffer of AppendKey's own, never
		// handed back to it: copied into ours.
		c.keyBuf = append(c.keyBuf[:0], b...)
		b = c.keyBuf
	}
	return unsafe.String(&b[0], len(b)), true
}

// lookup returns key's record, made afresh if the key is new (count 0),
// and the loss of the record evicted to make room. A scratch key (dedupKey)
// is copied to be remembered.
func (c *Correlator[T]) lookup(key string, scratch bool) (*seen[T], loss) {
	if e, ok := c.dedupCache.Get(key); ok {
		return e, loss{}
	}
	var l loss
	var e *seen[T]
	if c.dedupCache.Len() >= c.dedupSize {
		if _, old, ok := c.dedupCache.RemoveOldest(); ok {
			if c.open(old) {
				c.evicted++
			}
			l = c.forget(old, DropFull)
			if !old.gone {
				e = old // reused: no allocation once the cache is full
				*e = seen[T]{}
			}
		}
	}
	if e == nil {
		e = new(seen[T])
	}
	if scratch {
		key = strings.Clone(key)
	}
	c.seq++
	e.id, e.key = c.seq, key
	c.dedupCache.Add(key, e)
	return e, l
}

// first records v, a private copy, as the first occurrence of e's key. A
// record that was remembered with a count of 0 or less starts afresh but
// keeps its merged values not yet written.
// The user's functions (Count, Time, the clock, Clone) run before e
// changes, so that one that panics leaves no record counted but without
// its value.
func (c *Correlator[T]) first(e *seen[T], v T, now time.Time) {
	n := 1
	if c.dedup.Count != nil {
		n = c.dedup.Count(v)
	}
	last, kept := c.occurred(v, now), c.own(v, c.clone == nil)
	e.count, e.last, e.ver, e.v = n, last, e.ver+1, kept
}

// repeat records v as occurrence e.count+1 of e's key and completes r.
func (c *Correlator[T]) repeat(r Correlation[T], e *seen[T], v T, own bool, now time.Time) Correlation[T] {
	r.Count = e.count + 1
	e.count, e.last, e.ver = r.Count, c.occurred(v, now), e.ver+1
	if m := c.dedup.Merge; m != nil {
		e.v = m(e.v, r.Count, e.last)
		if w := c.dedup.WriteFirst; w > 0 && r.Count > w {
			e.pending++
			r.Value, r.Merged = v, true
			return r
		}
		r.Value = c.own(e.v, c.clone == nil)
	} else {
		v = c.own(v, own)
		if c.dedup.Repeat != nil {
			v = c.dedup.Repeat(v, e.v, r.Count)
		}
		e.v, r.Value = c.own(v, c.clone == nil), v
	}
	r.Skip = c.skip(r.Value, now)
	return r
}

// occurred returns when v happened: the dedup stage's Time, or now (the
// clock's reading, if now is zero).
func (c *Correlator[T]) occurred(v T, now time.Time) time.Time {
	if c.dedup.Time != nil {
		if t := c.dedup.Time(v); !t.IsZero() {
			return t
		}
	}
	if now.IsZero() {
		return c.clock.Now()
	}
	return now
}

// aggregate records v in its group and reports whether the group now has
// enough distinct local keys to combine v, and the group key.
func (c *Correlator[T]) aggregate(v T, now time.Time) (string, bool) {
	group, local := c.agg.Key(v)
	rec, ok := c.aggCache.Get(group)
	if !ok || now.Sub(rec.last) > c.aggIvl {
		rec = &aggRecord{keys: make(map[string]struct{})}
	}
	if _, dup := rec.keys[local]; !dup {
		rec.keys[local] = struct{}{}
		rec.order = append(rec.order, local)
	}
	rec.last = now
	c.aggCache.Add(group, rec)
	if len(rec.order) < c.aggMax {
		return group, false
	}
	// Keep the set below the threshold, so that every further new local
	// key aggregates again. client-go removes an arbitrary key here (map
	// order); removing the oldest is one of its possible choices, made
	// deterministic.
	delete(rec.keys, rec.order[0])
	rec.order = rec.order[1:]
	return group, true
}

// Observe records v as the latest stored state of its dedup key, typically
// the value a sink returned after writing, so that the next repeat refers to
// it (client-go: UpdateState). The count is the dedup stage's Count(v), or
// the remembered one. A v whose Count is positive and below the
// remembered count is ignored: with several writers ([WithWriters]) a write
// may end after a later occurrence of its key was correlated, and its
// stored value must not take the count back (with one writer the count a
// sink returns is the one it was given, so this does not happen). A count
// of 0 or less still makes the key count as never seen. Without a dedup
// stage Observe does nothing.
func (c *Correlator[T]) Observe(v T) {
	if c.dedup == nil {
		return
	}
	c.lose(c.observe(v))
}

func (c *Correlator[T]) observe(v T) loss {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, l := c.lookup(c.dedupKey(v))
	// The user's functions run before e changes (see first).
	n := max(e.count, 1)
	if c.dedup.Count != nil {
		n = c.dedup.Count(v)
		if n > 0 && n < e.count {
			return l // stale: a later occurrence was correlated since
		}
	}
	last := e.last
	if last.IsZero() {
		last = c.clock.Now()
	}
	e.count, e.last, e.v = n, last, c.own(v, c.clone == nil)
	return l
}
