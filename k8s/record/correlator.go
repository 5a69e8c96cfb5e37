package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/k8s/internal/adapt"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/clock"
)

// client-go's defaults (tools/record/events_cache.go), from the core.
const (
	defaultAggregateIntervalInSec         = int(fanout.DefaultAggregateInterval / time.Second)
	defaultSpamQPS                float32 = float32(fanout.DefaultSpamRate)
)

// combinedPrefix starts the message of a combined event.
const combinedPrefix = "(combined from similar events): "

// eventKey is the deduplication key: source, involved object with its
// field path, type, reason and message, concatenated as client-go's.
func eventKey(e *v1.Event) string {
	f := keyFields(e)
	return strings.Join(f[:], "")
}

// appendEventKey appends e's eventKey to dst, for the correlator's dedup
// stage (fanout.DedupStage.AppendKey), which builds each key in a buffer of
// its own rather than a string per event.
func appendEventKey(dst []byte, e *v1.Event) []byte {
	for _, f := range keyFields(e) {
		dst = append(dst, f...)
	}
	return dst
}

// keyFields returns the fields of e's eventKey, in its order.
func keyFields(e *v1.Event) [11]string {
	return [11]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		e.InvolvedObject.FieldPath, string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason, e.Message,
	}
}

// sameKey reports whether a and b have the same eventKey field by field:
// whether a key built for one holds for the other, without building it.
func sameKey(a, b *v1.Event) bool {
	return a == b || keyFields(a) == keyFields(b)
}

// spamKey is the default spam-filter key: source, involved object without
// its field path, and type.
func spamKey(e *v1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type,
	}, "")
}

// EventAggregatorByReasonFunc groups events that differ only in their
// message: the group key holds the source, the involved object (without
// field path), type, reason and reporting controller and instance; the
// key within the group is the message. A nil event gives empty keys.
func EventAggregatorByReasonFunc(event *v1.Event) (string, string) {
	if event == nil {
		return "", ""
	}
	return strings.Join([]string{
		event.Source.Component, event.Source.Host,
		event.InvolvedObject.Kind, event.InvolvedObject.Namespace, event.InvolvedObject.Name,
		string(event.InvolvedObject.UID), event.InvolvedObject.APIVersion,
		event.Type, event.Reason,
		event.ReportingController, event.ReportingInstance,
	}, ""), event.Message
}

// EventAggregatorByReasonMessageFunc returns the message of a combined
// event: the incoming message prefixed with
// "(combined from similar events): ". A nil event gives the bare prefix.
func EventAggregatorByReasonMessageFunc(event *v1.Event) string {
	if event == nil {
		return combinedPrefix
	}
	return combinedPrefix + event.Message
}

// options fills the zero (or, unlike client-go, negative) fields of o
// with client-go's defaults: the package's option rule, shared with
// k8s/events ([adapt.Size]).
func options(o CorrelatorOptions) CorrelatorOptions {
	o.LRUCacheSize = adapt.CacheSize(o.LRUCacheSize)
	o.BurstSize = adapt.Size(o.BurstSize, fanout.DefaultSpamBurst, math.MaxInt)
	if !(o.QPS > 0) { // also NaN; +Inf turns the filter off, as in client-go
		o.QPS = defaultSpamQPS
	}
	if o.KeyFunc == nil {
		o.KeyFunc = EventAggregatorByReasonFunc
	}
	if o.MessageFunc == nil {
		o.MessageFunc = EventAggregatorByReasonMessageFunc
	}
	o.MaxEvents = adapt.Size(o.MaxEvents, fanout.DefaultAggregateMaxKeys, math.MaxInt)
	// Saturate where client-go's seconds-to-Duration product overflows.
	o.MaxIntervalInSeconds = adapt.Size(o.MaxIntervalInSeconds, defaultAggregateIntervalInSec, int(math.MaxInt64/int64(time.Second)))
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SpamKeyFunc == nil {
		o.SpamKeyFunc = spamKey
	}
	return o
}

// shallowCopy copies an event as client-go does (by value).
func shallowCopy(e *v1.Event) *v1.Event { c := *e; return &c }

func aggregateStage(o CorrelatorOptions) *fanout.AggregateStage[*v1.Event] {
	keyFunc, messageFunc := o.KeyFunc, o.MessageFunc
	return &fanout.AggregateStage[*v1.Event]{
		Key: func(e *v1.Event) (string, string) { return keyFunc(e) },
		Combine: func(e *v1.Event, now time.Time) *v1.Event {
			t := metav1.NewTime(now)
			return &v1.Event{
				ObjectMeta: metav1.ObjectMeta{
					Name:      fmt.Sprintf("%v.%x", e.InvolvedObject.Name, t.UnixNano()),
					Namespace: e.Namespace,
				},
				Count:          1,
				FirstTimestamp: t,
				InvolvedObject: e.InvolvedObject,
				LastTimestamp:  t,
				Message:        messageFunc(e),
				Type:           e.Type,
				Reason:         e.Reason,
				Source:         e.Source,
			}
		},
		MaxKeys:  o.MaxEvents,
		Interval: time.Duration(o.MaxIntervalInSeconds) * time.Second,
	}
}

// dedupStage counts repeats. onRepeat, if not nil, is called for each
// repeat of an event seen before.
func dedupStage(onRepeat func()) *fanout.DedupStage[*v1.Event] {
	return &fanout.DedupStage[*v1.Event]{
		AppendKey: appendEventKey,
		// e is the correlator's own copy (Clone): changed in place.
		Repeat: func(e, prev *v1.Event, n int) *v1.Event {
			if onRepeat != nil {
				onRepeat()
			}
			e.Name = prev.Name
			e.ResourceVersion = prev.ResourceVersion
			e.FirstTimestamp = prev.FirstTimestamp
			e.Count = int32(min(n, int(^uint32(0)>>1)))
			return e
		},
		Count: func(e *v1.Event) int { return int(e.Count) },
	}
}

func spamStage(o CorrelatorOptions) *fanout.SpamStage[*v1.Event] {
	return &fanout.SpamStage[*v1.Event]{
		Key:   o.SpamKeyFunc,
		Burst: o.BurstSize,
		Rate:  float64(o.QPS), // a float32 widened, as client-go's limiter gets it
	}
}

// newCorrelator returns the core correlator configured like client-go's
// EventCorrelator with options o (defaults filled in); onRepeat as for
// dedupStage.
func newCorrelator(o CorrelatorOptions, onRepeat func()) *fanout.Correlator[*v1.Event] {
	o = options(o)
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[*v1.Event]{
		CacheSize: o.LRUCacheSize,
		Clock:     o.Clock,
		Clone:     shallowCopy,
		Aggregate: aggregateStage(o),
		Dedup:     dedupStage(onRepeat),
		Spam:      spamStage(o),
	})
	if err != nil {
		// options has made every field valid.
		panic(fmt.Sprintf("record: correlator configuration: %v", err))
	}
	return c
}

// sinkCorrelator returns the correlator of one sink. With a key function of
// the caller's (KeyFunc, SpamKeyFunc), which may change the event it is
// given, each event is shallow-copied first, as client-go's sinks do: the
// change stays in that sink's copy, and the event that other sinks and
// watchers share is not written to.
func sinkCorrelator(o CorrelatorOptions) fanout.SinkCorrelator[*v1.Event] {
	c := newCorrelator(o, nil)
	if o.KeyFunc == nil && o.SpamKeyFunc == nil {
		return c // ours only read the event
	}
	return copyFirst{c}
}

// copyFirst is a correlator that correlates a copy of each event.
type copyFirst struct{ *fanout.Correlator[*v1.Event] }

func (c copyFirst) Correlate(e *v1.Event) fanout.Correlation[*v1.Event] {
	return c.Correlator.Correlate(shallowCopy(e))
}

// repeatPatch returns the strategic merge patch for a repeated event: its
// count, last timestamp and message, byte for byte as client-go computes
// it. client-go diffs two JSON encodings of the event through the
// strategic-merge machinery (about 25 µs and 100 allocations); the patch
// can only hold those three fields, so the usual case is written directly
// and the rest (a zero count or timestamp) goes the long way.
// TestRepeatPatchFastPath checks the two agree.
func repeatPatch(e *v1.Event) ([]byte, error) {
	if p, ok := fastRepeatPatch(e); ok {
		return p, nil
	}
	return slowRepeatPatch(e)
}

// epochJSON is how the patch's reference event encodes its last timestamp.
const epochJSON = `"1970-01-01T00:00:00Z"`

// fastRepeatPatch writes the patch for an event with a non-zero count and a
// last timestamp that is neither zero nor, at second precision, the epoch,
// and a valid UTF-8 message.
// Keys are in the order encoding/json sorts them, values encoded as it
// encodes them.
func fastRepeatPatch(e *v1.Event) ([]byte, bool) {
	if e.Count == 0 || e.LastTimestamp.IsZero() || !utf8.ValidString(e.Message) {
		// Invalid UTF-8: client-go's round trip turns the first encoding's
		// \ufffd escapes into literal U+FFFD characters.
		return nil, false
	}
	p := make([]byte, 0, 80+len(e.Message))
	p = append(p, `{"count":`...)
	p = strconv.AppendInt(p, int64(e.Count), 10)
	p = append(p, `,"lastTimestamp":`...)
	ts := len(p)
	p = appendTimeJSON(p, e.LastTimestamp)
	if string(p[ts:]) == epochJSON {
		return nil, false
	}
	if e.Message != "" {
		p = append(p, `,"message":`...)
		p = appendStringJSON(p, e.Message)
	}
	return append(p, '}'), true
}

// appendTimeJSON appends t, not zero, as metav1.Time's MarshalJSON encodes
// it (a quoted RFC 3339 time in UTC), without its allocation.
func appendTimeJSON(p []byte, t metav1.Time) []byte {
	p = append(p, '"')
	p = t.UTC().AppendFormat(p, time.RFC3339)
	return append(p, '"')
}

// appendStringJSON appends s quoted as encoding/json encodes it: directly
// when no byte of it needs an escape (printable ASCII but for the quote,
// the backslash and the three HTML characters json escapes), through
// json.Marshal otherwise.
func appendStringJSON(p []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(p, q...)
		}
	}
	p = append(p, '"')
	p = append(p, s...)
	return append(p, '"')
}

// slowRepeatPatch is client-go's computation.
func slowRepeatPatch(e *v1.Event) ([]byte, error) {
	old := *e
	old.Count = 0
	old.LastTimestamp = metav1.NewTime(time.Unix(0, 0))
	old.Message = ""
	newData, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	oldData, err := json.Marshal(&old)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, e)
}

// EventCorrelator aggregates similar events, counts repeats and filters
// spam, like client-go's EventCorrelator, whose decisions it makes: a
// sequence of events gives the same skips, names, counts, timestamps and
// patches. Unlike client-go it never depends on map iteration order (at
// the aggregation threshold it forgets the oldest message, which is one of
// client-go's possible choices), and it does not panic on nil events or
// panicking key functions.
type EventCorrelator struct {
	mu       sync.Mutex // makes repeated belong to one EventCorrelate
	c        *fanout.Correlator[*v1.Event]
	repeated bool
}

// NewEventCorrelator returns an EventCorrelator with client-go's defaults:
// aggregation after 10 distinct messages within 600 s, counting of exact
// repeats, and a spam budget of 25 events per source and object, refilled
// at one per 300 s. A nil clock means the system clock.
func NewEventCorrelator(clock clock.PassiveClock) *EventCorrelator {
	return NewEventCorrelatorWithOptions(CorrelatorOptions{Clock: clock})
}

// NewEventCorrelatorWithOptions returns an EventCorrelator tuned by
// options; a zero or negative field means client-go's default.
func NewEventCorrelatorWithOptions(options CorrelatorOptions) *EventCorrelator {
	c := &EventCorrelator{}
	c.c = newCorrelator(options, func() { c.repeated = true })
	return c
}

// EventCorrelate filters, aggregates, counts and deduplicates newEvent.
// For a repeat the result holds a strategic merge patch for the stored
// event. It returns an error for a nil event.
func (c *EventCorrelator) EventCorrelate(newEvent *v1.Event) (*EventCorrelateResult, error) {
	if newEvent == nil {
		return nil, errors.New("event is nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repeated = false
	var res fanout.Correlation[*v1.Event]
	if err := guard.Call(func() { res = c.c.Correlate(newEvent) }); err != nil {
		return nil, err
	}
	if res.Skip {
		return &EventCorrelateResult{Skip: true}, nil
	}
	out := &EventCorrelateResult{Event: res.Value}
	// As client-go, a patch only for a repeat of an event seen before, not
	// for a first occurrence whose own count is above 1.
	if c.repeated {
		p, err := repeatPatch(res.Value)
		out.Patch = p
		return out, err
	}
	return out, nil
}

// UpdateState records the event as the API server stored it, so that a
// later repeat refers to it. A nil event is ignored. As in client-go, the
// server's copy replaces what was remembered even when its count is lower.
func (c *EventCorrelator) UpdateState(event *v1.Event) {
	if event == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = guard.Call(func() {
		if event.Count > 0 {
			// The core ignores a count below the remembered one (a write
			// that ended after a later repeat was correlated, with several
			// writers); client-go's UpdateState overwrites. A count of 0
			// first makes the key never seen, so that the server's copy
			// is taken whole.
			forget := *event
			forget.Count = 0
			c.c.Observe(&forget)
		}
		c.c.Observe(event)
	})
}

// EventAggregator combines similar events: once MaxEvents distinct
// messages of one group have been seen, each no more than the interval
// apart, it replaces an event with a combined one. Like client-go's
// EventAggregator.
type EventAggregator struct {
	// RWMutex is there because client-go's EventAggregator embeds one:
	// code calling its Lock or RLock compiles, and, as in client-go,
	// EventAggregate holds it while it aggregates.
	sync.RWMutex
	c *fanout.Correlator[*v1.Event]
}

// NewEventAggregator returns an aggregator with an LRU of lruCacheSize
// groups, grouping by keyFunc, naming combined events with messageFunc,
// after maxEvents distinct messages no more than maxIntervalInSeconds
// apart. Zero or negative numbers and nil functions mean client-go's
// defaults.
func NewEventAggregator(lruCacheSize int, keyFunc EventAggregatorKeyFunc, messageFunc EventAggregatorMessageFunc,
	maxEvents int, maxIntervalInSeconds int, clock clock.PassiveClock) *EventAggregator {
	o := options(CorrelatorOptions{
		LRUCacheSize: lruCacheSize, KeyFunc: keyFunc, MessageFunc: messageFunc,
		MaxEvents: maxEvents, MaxIntervalInSeconds: maxIntervalInSeconds, Clock: clock,
	})
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[*v1.Event]{
		CacheSize: o.LRUCacheSize, Clock: o.Clock, Clone: shallowCopy, Aggregate: aggregateStage(o),
	})
	if err != nil {
		panic(fmt.Sprintf("record: aggregator configuration: %v", err))
	}
	return &EventAggregator{c: c}
}

// EventAggregate returns the event to write, newEvent itself or a combined
// event, and the key to count it under: the full event key for newEvent,
// the group key for a combined event. A nil event gives (nil, "").
func (e *EventAggregator) EventAggregate(newEvent *v1.Event) (*v1.Event, string) {
	if newEvent == nil {
		return nil, ""
	}
	var res fanout.Correlation[*v1.Event]
	e.Lock()
	err := guard.Call(func() { res = e.c.Correlate(newEvent) })
	e.Unlock()
	if err != nil || !res.Aggregated {
		return newEvent, eventKey(newEvent)
	}
	return res.Value, res.Key
}

// EventSourceObjectSpamFilter limits how many events a source can emit
// about an object: a token bucket per key, like client-go's.
type EventSourceObjectSpamFilter struct {
	c *fanout.Correlator[*v1.Event]
}

// NewEventSourceObjectSpamFilter returns a filter with an LRU of
// lruCacheSize buckets of burst tokens refilled at qps per second, keyed
// by spamKeyFunc. Zero or negative numbers and nil functions mean
// client-go's defaults.
func NewEventSourceObjectSpamFilter(lruCacheSize, burst int, qps float32, clock clock.PassiveClock, spamKeyFunc EventSpamKeyFunc) *EventSourceObjectSpamFilter {
	o := options(CorrelatorOptions{LRUCacheSize: lruCacheSize, BurstSize: burst, QPS: qps, Clock: clock, SpamKeyFunc: spamKeyFunc})
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[*v1.Event]{
		CacheSize: o.LRUCacheSize, Clock: o.Clock, Clone: shallowCopy, Spam: spamStage(o),
	})
	if err != nil {
		panic(fmt.Sprintf("record: spam filter configuration: %v", err))
	}
	return &EventSourceObjectSpamFilter{c: c}
}

// Filter reports whether event should be skipped: true when its key has no
// token left. A nil event is skipped.
func (f *EventSourceObjectSpamFilter) Filter(event *v1.Event) bool {
	if event == nil {
		return true
	}
	skip := false
	if err := guard.Call(func() { skip = f.c.Correlate(event).Skip }); err != nil {
		return true
	}
	return skip
}
