package record_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientrecord "k8s.io/client-go/tools/record"
)

// The scenarios of client-go's TestEventCorrelator and TestEventSpamFilter
// (tools/record/events_cache_test.go), rewritten: every event is fed to
// both correlators, every step must agree, and the last one must also give
// the outcome client-go's test expects.
//
// client-go's tests use a SimpleIntervalClock, which moves on every read;
// here one settable clock is shared and moved once per event, so 600 s is
// still within the aggregation window (client-go tests "> interval"); the
// "further apart" scenario steps 601 s, and a boundary scenario checks
// 600 s.

// parityTemplate is an event before it is stamped with the clock's time.
type parityTemplate struct {
	obj       v1.ObjectReference
	eventType string
	reason    string
	message   string
}

func (tp parityTemplate) at(now time.Time) v1.Event {
	return parityNewEvent(now, tp.obj, tp.eventType, tp.reason, tp.message)
}

func parityRepeated(n int, tp parityTemplate) []parityTemplate {
	out := make([]parityTemplate, n)
	for i := range out {
		out[i] = tp
	}
	return out
}

// paritySimilar returns n events that differ from tp only by message.
func paritySimilar(n int, tp parityTemplate) []parityTemplate {
	out := parityRepeated(n, tp)
	for i := range out {
		out[i].message = tp.message + "-" + strconv.Itoa(i)
	}
	return out
}

// parityUnique returns n events about n different objects, with different
// reasons and messages.
func parityUnique(n int) []parityTemplate {
	out := make([]parityTemplate, n)
	for i := range out {
		s := strconv.Itoa(i)
		out[i] = parityTemplate{
			obj:       parityPodRef("ns-"+s, "pod-"+s, "spec.containers{c}"),
			eventType: v1.EventTypeNormal,
			reason:    "reason-" + s,
			message:   "message-" + s,
		}
	}
	return out
}

type parityWant struct {
	skip       bool
	count      int32
	message    string
	aggregated bool
}

func TestParityScenarios(t *testing.T) {
	myPod := parityPodRef("my-ns", "my-pod", "spec.containers{mycontainer}")
	first := parityTemplate{myPod, v1.EventTypeNormal, "first", "i am first"}
	duplicate := parityTemplate{myPod, v1.EventTypeNormal, "duplicate", "me again"}
	snowflake := parityTemplate{myPod, v1.EventTypeNormal, "unique", "snowflake"}
	similarEv := parityTemplate{parityPodRef("my-ns", "my-pod", "spec.containers{container1}"), v1.EventTypeNormal, "similar", "similar message"}
	otherContainer := similarEv
	otherContainer.obj.FieldPath = "spec.containers{container2}"
	combined := "(combined from similar events): " + similarEv.message

	// client-go's TestEventSpamFilter: burst 1, default or reason-based key.
	byReason := func(e *v1.Event) string { return parityClientSpamKey(e) + "/" + e.Reason }
	original := parityTemplate{myPod, v1.EventTypeNormal, "original", "i am first"}
	differentReason := parityTemplate{myPod, v1.EventTypeNormal, "duplicate", "me again"}
	sameReason := parityTemplate{myPod, v1.EventTypeNormal, "original", "me again"}
	burst1 := record.CorrelatorOptions{BurstSize: 1}
	burst1ByReason := record.CorrelatorOptions{BurstSize: 1, SpamKeyFunc: byReason}

	sec := time.Second
	scenarios := []struct {
		name     string
		opts     record.CorrelatorOptions
		interval time.Duration
		previous []parityTemplate
		event    parityTemplate
		want     parityWant
	}{
		// TestEventCorrelator
		{name: "single event is created", interval: 5 * sec,
			event: first, want: parityWant{count: 1, message: first.message}},
		{name: "same event is counted", interval: 5 * sec,
			previous: parityRepeated(1, duplicate), event: duplicate,
			want: parityWant{count: 2, message: duplicate.message}},
		{name: "same event is counted past the aggregation threshold", interval: 30 * sec,
			previous: parityRepeated(parityDefaultMaxEvents, duplicate), event: duplicate,
			want: parityWant{count: parityDefaultMaxEvents + 1, message: duplicate.message}},
		{name: "same event too often is spam", interval: sec,
			previous: parityRepeated(parityDefaultBurst+1, duplicate), event: duplicate,
			want: parityWant{skip: true}},
		{name: "many unique events are created", interval: 5 * sec,
			previous: parityUnique(30), event: snowflake,
			want: parityWant{count: 1, message: snowflake.message}},
		{name: "similar events are aggregated", interval: 5 * sec,
			previous: paritySimilar(parityDefaultMaxEvents-1, similarEv), event: similarEv,
			want: parityWant{count: 1, message: combined, aggregated: true}},
		{name: "aggregate event is counted", interval: 5 * sec,
			previous: paritySimilar(parityDefaultMaxEvents, similarEv), event: similarEv,
			want: parityWant{count: 2, message: combined, aggregated: true}},
		{name: "different containers do not aggregate", interval: 5 * sec,
			previous: parityRepeated(1, otherContainer), event: similarEv,
			want: parityWant{count: 1, message: similarEv.message}},
		{name: "similar events further apart than the interval do not aggregate", interval: 601 * sec,
			previous: paritySimilar(parityDefaultMaxEvents-1, similarEv), event: similarEv,
			want: parityWant{count: 1, message: similarEv.message}},
		// Boundaries and eviction, beyond client-go's scenarios.
		{name: "similar events exactly the interval apart aggregate", interval: 600 * sec,
			previous: paritySimilar(parityDefaultMaxEvents-1, similarEv), event: similarEv,
			want: parityWant{count: 1, message: combined, aggregated: true}},
		{name: "similar events one nanosecond over the interval do not aggregate", interval: 600*sec + 1,
			previous: paritySimilar(parityDefaultMaxEvents-1, similarEv), event: similarEv,
			want: parityWant{count: 1, message: similarEv.message}},
		{name: "cache of one forgets the count", interval: sec,
			opts:     record.CorrelatorOptions{LRUCacheSize: 1},
			previous: []parityTemplate{duplicate, first}, event: duplicate,
			want: parityWant{count: 1, message: duplicate.message}},
		{name: "cache of one forgets the aggregation group", interval: sec,
			opts:     record.CorrelatorOptions{LRUCacheSize: 1},
			previous: append(paritySimilar(parityDefaultMaxEvents-1, similarEv), first), event: similarEv,
			want: parityWant{count: 1, message: similarEv.message}},
		{name: "spam token refills after 300 s", interval: 300 * sec,
			opts:     burst1,
			previous: parityRepeated(1, duplicate), event: duplicate,
			want: parityWant{count: 2, message: duplicate.message}},
		{name: "spam token not yet refilled after 299 s", interval: 299 * sec,
			opts:     burst1,
			previous: parityRepeated(1, duplicate), event: duplicate,
			want: parityWant{skip: true}},
		// TestEventSpamFilter
		{name: "same object is spam with the default key", interval: sec,
			opts:     burst1,
			previous: []parityTemplate{original}, event: differentReason,
			want: parityWant{skip: true}},
		{name: "different reason is not spam with a reason key", interval: sec,
			opts:     burst1ByReason,
			previous: []parityTemplate{original}, event: differentReason,
			want: parityWant{count: 1, message: differentReason.message}},
		{name: "same reason is spam with a reason key", interval: sec,
			opts:     burst1ByReason,
			previous: []parityTemplate{original}, event: sameReason,
			want: parityWant{skip: true}},
	}

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			p := parityNewPair(parityStart, sc.opts)
			rv := 0
			play := func(i int, tp parityTemplate) parityOutcome {
				p.advance(sc.interval)
				o := p.correlate(tp.at(p.clock.Now()))
				parityMust(t, "event "+strconv.Itoa(i)+" "+tp.message, o)
				if !o.skipped() {
					rv++
					p.written(o, strconv.Itoa(rv))
				}
				return o
			}
			for i, tp := range sc.previous {
				play(i, tp)
			}
			o := play(len(sc.previous), sc.event)
			now := metav1.NewTime(p.clock.Now())

			// Both must give what client-go's test expects.
			for _, side := range []struct {
				name       string
				aggregated bool
				r          *clientrecord.EventCorrelateResult
				err        error
			}{
				{"client-go", o.clientAggregated, o.client, o.clientErr},
				{"ours", o.oursAggregated, o.ours, o.oursErr},
			} {
				if side.err != nil || side.r == nil {
					t.Errorf("%s: result %v, error %v", side.name, side.r, side.err)
					continue
				}
				if side.r.Skip != sc.want.skip {
					t.Errorf("%s: skip %v, want %v", side.name, side.r.Skip, sc.want.skip)
					continue
				}
				if side.aggregated != sc.want.aggregated {
					t.Errorf("%s: aggregated %v, want %v", side.name, side.aggregated, sc.want.aggregated)
				}
				if side.r.Skip {
					if side.r.Event != nil || side.r.Patch != nil {
						t.Errorf("%s: skipped with event %s, patch %s", side.name, parityDescribe(side.r.Event), side.r.Patch)
					}
					continue
				}
				e := side.r.Event
				if e.Count != sc.want.count || e.Message != sc.want.message {
					t.Errorf("%s: count %d message %q, want %d %q", side.name, e.Count, e.Message, sc.want.count, sc.want.message)
				}
				if prefix := sc.event.obj.Name + "."; !strings.HasPrefix(e.Name, prefix) {
					t.Errorf("%s: name %q, want prefix %q", side.name, e.Name, prefix)
				}
				if !e.LastTimestamp.Equal(&now) {
					t.Errorf("%s: lastTimestamp %v, want now %v", side.name, e.LastTimestamp, now)
				}
				if repeat := e.Count > 1; repeat == e.FirstTimestamp.Equal(&e.LastTimestamp) || repeat != (side.r.Patch != nil) {
					t.Errorf("%s: count %d with firstTimestamp %v, lastTimestamp %v, patch %s",
						side.name, e.Count, e.FirstTimestamp, e.LastTimestamp, side.r.Patch)
				}
			}
		})
	}
}

// TestParityServerState: what UpdateState is given wins over what the
// correlator remembered, as when the server's copy of an event was updated
// by another recorder: its count, name, resource version and first
// timestamp are those the next repeat builds on; fields UpdateState does
// not keep (the message's case, labels) do not leak into the repeat.
func TestParityServerState(t *testing.T) {
	tp := parityTemplate{parityPodRef("ns", "pod", "spec.containers{app}"), v1.EventTypeWarning, "BackOff", "restarting"}
	server := func(e *v1.Event, rv string, count int32) *v1.Event {
		s := parityServerCopy(e, rv)
		s.Name = "pod.server-" + rv
		s.Count = count
		s.FirstTimestamp = metav1.NewTime(parityStart.Add(-time.Hour))
		s.Labels = map[string]string{"from": "server"}
		s.UID = "server-uid"
		return s
	}

	t.Run("update after the first write", func(t *testing.T) {
		p := parityNewPair(parityStart, record.CorrelatorOptions{})
		o := p.correlate(tp.at(p.clock.Now()))
		parityMust(t, "first", o)
		p.client.UpdateState(server(o.client.Event, "42", 7))
		p.ours.UpdateState(server(o.ours.Event, "42", 7))

		p.advance(time.Minute)
		o = p.correlate(tp.at(p.clock.Now()))
		parityMust(t, "repeat", o)
		if e := o.ours.Event; e == nil || e.Count != 8 || e.Name != "pod.server-42" || e.ResourceVersion != "42" ||
			!e.FirstTimestamp.Time.Equal(parityStart.Add(-time.Hour)) || e.Labels != nil || e.UID != "" {
			t.Errorf("repeat after the server's state: %+v", e)
		}
	})

	t.Run("update before any event", func(t *testing.T) {
		p := parityNewPair(parityStart, record.CorrelatorOptions{})
		e := tp.at(p.clock.Now())
		p.client.UpdateState(server(&e, "5", 3))
		p.ours.UpdateState(server(&e, "5", 3))
		p.advance(time.Second)
		parityMust(t, "after UpdateState alone", p.correlate(tp.at(p.clock.Now())))
	})

	t.Run("update with a lower count than remembered", func(t *testing.T) {
		// The server's copy was written by someone else (or recreated)
		// with a lower count: client-go builds the next repeat on it, its
		// name, resource version, first timestamp and count included.
		p := parityNewPair(parityStart, record.CorrelatorOptions{})
		var o parityOutcome
		for i := range 3 {
			p.advance(time.Second)
			o = p.correlate(tp.at(p.clock.Now()))
			parityMust(t, "event "+strconv.Itoa(i), o)
		}
		p.client.UpdateState(server(o.client.Event, "3", 1))
		p.ours.UpdateState(server(o.ours.Event, "3", 1))
		p.advance(time.Second)
		parityMust(t, "repeat after a lower server count", p.correlate(tp.at(p.clock.Now())))
	})

	t.Run("update with count 0 forgets", func(t *testing.T) {
		p := parityNewPair(parityStart, record.CorrelatorOptions{})
		o := p.correlate(tp.at(p.clock.Now()))
		parityMust(t, "first", o)
		p.client.UpdateState(server(o.client.Event, "9", 0))
		p.ours.UpdateState(server(o.ours.Event, "9", 0))
		p.advance(time.Second)
		parityMust(t, "after a count-0 update", p.correlate(tp.at(p.clock.Now())))
	})

	t.Run("update of an aggregated event", func(t *testing.T) {
		// client-go's UpdateState keys the server's copy by its full event
		// key, not the group key the combined event was counted under.
		// Every message is new to the window, so that client-go's
		// arbitrary pop at the threshold cannot change a decision.
		p := parityNewPair(parityStart, record.CorrelatorOptions{MaxEvents: 2})
		for i, msg := range []string{"a", "b", "c", "d", "e"} {
			ev := tp
			ev.message = msg
			p.advance(time.Second)
			o := p.correlate(ev.at(p.clock.Now()))
			parityMust(t, "event "+strconv.Itoa(i), o)
			if !o.skipped() {
				p.client.UpdateState(server(o.client.Event, strconv.Itoa(10+i), int32(20+i)))
				p.ours.UpdateState(server(o.ours.Event, strconv.Itoa(10+i), int32(20+i)))
			}
		}
	})

	t.Run("update after eviction", func(t *testing.T) {
		p := parityNewPair(parityStart, record.CorrelatorOptions{LRUCacheSize: 2})
		o := p.correlate(tp.at(p.clock.Now()))
		parityMust(t, "first", o)
		for i, other := range parityUnique(3) {
			p.advance(time.Second)
			parityMust(t, "other "+strconv.Itoa(i), p.correlate(other.at(p.clock.Now())))
		}
		p.client.UpdateState(server(o.client.Event, "77", 4))
		p.ours.UpdateState(server(o.ours.Event, "77", 4))
		p.advance(time.Second)
		parityMust(t, "repeat after eviction and update", p.correlate(tp.at(p.clock.Now())))
	})
}

// TestParityNilEvent: EventCorrelate(nil) is an error on both sides, with
// the same message and no result.
func TestParityNilEvent(t *testing.T) {
	p := parityNewPair(parityStart, record.CorrelatorOptions{})
	var o parityOutcome
	o.client, o.clientErr = p.client.EventCorrelate(nil)
	o.ours, o.oursErr = p.ours.EventCorrelate(nil)
	parityMust(t, "EventCorrelate(nil)", o)
	if o.oursErr == nil {
		t.Errorf("ours: EventCorrelate(nil) gave no error")
	}
}
