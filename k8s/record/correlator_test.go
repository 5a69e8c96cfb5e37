package record_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// A MaxIntervalInSeconds whose product with time.Second overflows a
// Duration saturates at the longest Duration: client-go computes an
// overflowed interval and goes on, and so must every constructor here
// rather than panic ("No input panics").
func TestHugeMaxIntervalSaturatesInsteadOfPanicking(t *testing.T) {
	const huge = 9_300_000_000 // seconds: ×1e9 overflows int64 to a negative Duration
	opts := record.CorrelatorOptions{MaxIntervalInSeconds: huge}
	assert.Nil(t, panicValue(func() { record.NewEventCorrelatorWithOptions(opts) }), "NewEventCorrelatorWithOptions")
	assert.Nil(t, panicValue(func() { record.NewEventAggregator(0, nil, nil, 0, huge, nil) }), "NewEventAggregator")
	synctest.Test(t, func(t *testing.T) {
		var b *record.Broadcaster
		var sink *apitest.CoreSink
		var r record.EventRecorderLogger
		p := panicValue(func() { b, sink, r = start(t, record.WithCorrelatorOptions(opts)) })
		require.Nil(t, p, "StartRecordingToSink")
		r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
		flush(t, b)
		assert.Len(t, sink.Calls(), 1)
	})
}

// EventAggregate holds the aggregator's embedded mutex, as client-go's
// does: code that locks the aggregator (its Lock compiles since it embeds
// a sync.RWMutex, as client-go's) keeps EventAggregate out meanwhile.
func TestEventAggregateHoldsTheAggregatorsMutex(t *testing.T) {
	var agg *record.EventAggregator
	held := false
	agg = record.NewEventAggregator(16, func(e *v1.Event) (string, string) {
		if agg.TryLock() {
			agg.Unlock()
		} else {
			held = true
		}
		return record.EventAggregatorByReasonFunc(e)
	}, nil, 0, 0, nil)
	agg.EventAggregate(&v1.Event{Reason: "R", Message: "m"})
	assert.True(t, held, "the key function ran without the aggregator's mutex held")
}
