package fanout

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

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

// DedupStage configures the counting stage of a [Correlator].
type DedupStage[T any] struct {
	// Key identifies identical values (client-go: every field but the
	// timestamps and count). Required.
	Key func(T) string
	// Repeat returns v marked as occurrence n (n ≥ 2) of the value
	// remembered as prev: typically v with prev's identity and first
	// timestamp, and count n. Nil means v unchanged.
	Repeat func(v, prev T, n int) T
	// Count returns the occurrence count a value carries, used for a first
	// occurrence and by [Correlator.Observe]. Nil means 1 for a first
	// occurrence, and the remembered count for Observe. A remembered count
	// of 0 or less is treated as never seen.
	Count func(T) int
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
	// Aggregated, marked as a repeat when Count > 1.
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
	// is written later (a series count, say): nothing to write now, and
	// nothing lost. [Correlator] never sets it; other [SinkCorrelator]
	// implementations may. A sink runner counts it in
	// [RunnerStats].Merged, not as a drop.
	Merged bool
}

// SinkCorrelator decides, for a sink runner, what to write for each value
// (see [Recorder.StartSink]): [Correlator] is the stock implementation,
// and a package may supply its own (the Kubernetes adapter's event series,
// for one). The runner calls Correlate once per value, in order, on its
// own goroutine, and Observe with what the sink returned after each
// successful write. Implementations shared by several runners must be
// safe for concurrent use.
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

	agg      *AggregateStage[T]
	aggMax   int
	aggIvl   time.Duration
	aggCache *simplelru.LRU[string, *aggRecord]

	dedup      *DedupStage[T]
	dedupCache *simplelru.LRU[string, seen[T]]

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

type seen[T any] struct {
	v     T
	count int
}

// NewCorrelator returns a correlator for cfg, or an error naming the first
// invalid field: a stage without its Key function, or a negative size,
// count, interval or rate.
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
	if a := cfg.Aggregate; a != nil {
		if a.Key == nil {
			return nil, errors.New("fanout: AggregateStage.Key is nil")
		}
		if a.MaxKeys < 0 || a.Interval < 0 {
			return nil, fmt.Errorf("fanout: invalid AggregateStage: MaxKeys %d and Interval %v must not be negative", a.MaxKeys, a.Interval)
		}
		c.agg, c.aggMax, c.aggIvl = a, a.MaxKeys, a.Interval
		if c.aggMax == 0 {
			c.aggMax = DefaultAggregateMaxKeys
		}
		if c.aggIvl == 0 {
			c.aggIvl = DefaultAggregateInterval
		}
		c.aggCache, _ = simplelru.NewLRU[string, *aggRecord](size, nil)
	}
	if d := cfg.Dedup; d != nil {
		if d.Key == nil {
			return nil, errors.New("fanout: DedupStage.Key is nil")
		}
		c.dedup = d
		c.dedupCache, _ = simplelru.NewLRU[string, seen[T]](size, nil)
	}
	if s := cfg.Spam; s != nil {
		if s.Key == nil {
			return nil, errors.New("fanout: SpamStage.Key is nil")
		}
		if s.Burst < 0 || s.Rate < 0 || math.IsNaN(s.Rate) {
			return nil, fmt.Errorf("fanout: invalid SpamStage: Burst %d and Rate %v must not be negative", s.Burst, s.Rate)
		}
		c.spam, c.spamBurst, c.spamRate = s, s.Burst, rate.Limit(s.Rate)
		if c.spamBurst == 0 {
			c.spamBurst = DefaultSpamBurst
		}
		if s.Rate == 0 {
			c.spamRate = rate.Limit(DefaultSpamRate)
		}
		c.spamCache, _ = simplelru.NewLRU[string, *rate.Limiter](size, nil)
	}
	return c, nil
}

// Correlate runs v through the stages and returns the decision. The stages
// remember v (and the dedup stage remembers its result) even when the spam
// filter then skips it, as client-go does.
func (c *Correlator[T]) Correlate(v T) Correlation[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.clone != nil {
		v = c.clone(v)
	}
	var r Correlation[T]
	if c.dedup != nil {
		r.Key = c.dedup.Key(v)
	}
	if c.agg != nil {
		if group, ok := c.aggregate(v, now); ok {
			r.Aggregated = true
			r.Key = group
			if c.agg.Combine != nil {
				v = c.agg.Combine(v, now)
			}
		}
	}
	r.Count = 1
	if c.dedup != nil {
		prev, ok := c.dedupCache.Get(r.Key)
		if ok && prev.count > 0 {
			r.Count = prev.count + 1
			if c.dedup.Repeat != nil {
				v = c.dedup.Repeat(v, prev.v, r.Count)
			}
		} else if c.dedup.Count != nil {
			r.Count = c.dedup.Count(v)
		}
		c.remember(r.Key, v, r.Count)
	}
	r.Value = v
	if c.spam != nil {
		k := c.spam.Key(v)
		lim, ok := c.spamCache.Get(k)
		if !ok {
			lim = rate.NewLimiter(c.spamRate, c.spamBurst)
		}
		r.Skip = !lim.AllowN(now, 1)
		c.spamCache.Add(k, lim)
	}
	return r
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

func (c *Correlator[T]) remember(key string, v T, count int) {
	if c.clone != nil {
		v = c.clone(v)
	}
	c.dedupCache.Add(key, seen[T]{v: v, count: count})
}

// Observe records v as the latest stored state of its dedup key, typically
// the value a sink returned after writing, so that the next repeat refers to
// it (client-go: UpdateState). The count is the dedup stage's Count(v), or
// the remembered one. Without a dedup stage Observe does nothing.
func (c *Correlator[T]) Observe(v T) {
	if c.dedup == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := c.dedup.Key(v)
	count := 1
	if c.dedup.Count != nil {
		count = c.dedup.Count(v)
	} else if prev, ok := c.dedupCache.Peek(key); ok {
		count = prev.count
	}
	c.remember(key, v, count)
}
