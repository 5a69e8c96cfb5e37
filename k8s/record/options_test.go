package record

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/stretchr/testify/assert"
)

// The option client-go has, WithSleepDuration, normalises as client-go's
// does: a negative pause means none.
func TestBroadcasterOptionsNormaliseOutOfRangeValues(t *testing.T) {
	def := config{sleep: 10 * time.Second, queueLength: 1000, writers: 32}
	with := func(f func(*config)) config { c := def; f(&c); return c }
	for _, tc := range []struct {
		name string
		opt  BroadcasterOption
		want config
	}{
		{"no option", nil, def},
		{"WithSleepDuration 0 retries at once", WithSleepDuration(0), with(func(c *config) { c.sleep = 0 })},
		{"WithSleepDuration negative retries at once", WithSleepDuration(-time.Second), with(func(c *config) { c.sleep = 0 })},
		{"WithSleepDuration positive", WithSleepDuration(time.Second), with(func(c *config) { c.sleep = time.Second })},
		{"WithQueueLength 1", WithQueueLength(1), with(func(c *config) { c.queueLength = 1 })},
		{"WithQueueLength the maximum", WithQueueLength(fanout.MaxQueueLength), with(func(c *config) { c.queueLength = fanout.MaxQueueLength })},
		{"WithWriters 1", WithWriters(1), with(func(c *config) { c.writers = 1 })},
		{"WithWriters the maximum", WithWriters(fanout.MaxWriters), with(func(c *config) { c.writers = fanout.MaxWriters })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, newConfig([]BroadcasterOption{tc.opt}))
			b := New(tc.opt)
			b.Shutdown()
		})
	}
}

// WithQueueLength, which client-go has not, refuses what is not a length:
// 0 is neither the default nor the core's hand-off queue. New cannot
// return the error (client-go's signature), so it panics saying so;
// NewChecked returns it.
func TestWithQueueLengthOutOfRangePanicsInNew(t *testing.T) {
	for _, n := range []int{0, -1, fanout.MaxQueueLength + 1} {
		assert.PanicsWithError(t, fmt.Sprintf("record: WithQueueLength(%d): the length must be 1 to %d; leave the option out for the default, 1000 (unlike the core's, 0 is neither a hand-off nor the default here)", n, fanout.MaxQueueLength),
			func() { New(WithQueueLength(n)) })
		b, err := NewChecked(WithQueueLength(n))
		assert.Nil(t, b)
		assert.ErrorContains(t, err, fmt.Sprintf("record: WithQueueLength(%d)", n), "NewChecked returns what New panics with")
	}
}

// WithWriters, which client-go has not, refuses what is not a number of
// writers, as WithQueueLength does.
func TestWithWritersOutOfRangePanicsInNew(t *testing.T) {
	for _, n := range []int{0, -1, fanout.MaxWriters + 1} {
		assert.PanicsWithError(t, fmt.Sprintf("record: WithWriters(%d): the number must be 1 to %d; leave the option out for the default, 32", n, fanout.MaxWriters),
			func() { New(WithWriters(n)) })
		b, err := NewChecked(WithWriters(n))
		assert.Nil(t, b)
		assert.ErrorContains(t, err, fmt.Sprintf("record: WithWriters(%d)", n))
	}
}

func TestBroadcasterRetriesAsClientGo(t *testing.T) {
	p := newConfig(nil).retry()
	assert.Equal(t, 12, p.MaxTries)
	assert.Equal(t, 10*time.Second, p.Sleep)
	assert.True(t, p.RandomFirst, "the first pause is random in [0, sleep)")
	assert.Zero(t, p.Jitter)
}

// CorrelatorOptions follow client-go for zero fields (the default) and the
// same rule for negative ones, where client-go would misbehave.
func TestCorrelatorOptionsNormaliseOutOfRangeValues(t *testing.T) {
	type fields struct {
		cache, burst, maxEvents, interval int
		qps                               float32
	}
	def := fields{4096, 25, 10, 600, 1. / 300.}
	for _, tc := range []struct {
		name string
		in   CorrelatorOptions
		want fields
	}{
		{"zero value is client-go's defaults", CorrelatorOptions{}, def},
		{"LRUCacheSize negative is the default", CorrelatorOptions{LRUCacheSize: -1}, def},
		{"LRUCacheSize 1", CorrelatorOptions{LRUCacheSize: 1}, fields{1, 25, 10, 600, 1. / 300.}},
		{"BurstSize negative is the default", CorrelatorOptions{BurstSize: -1}, def},
		{"BurstSize 1", CorrelatorOptions{BurstSize: 1}, fields{4096, 1, 10, 600, 1. / 300.}},
		{"QPS negative is the default", CorrelatorOptions{QPS: -1}, def},
		{"QPS NaN is the default", CorrelatorOptions{QPS: float32(math.NaN())}, def},
		{"QPS +Inf turns the filter off", CorrelatorOptions{QPS: float32(math.Inf(1))}, fields{4096, 25, 10, 600, float32(math.Inf(1))}},
		{"MaxEvents negative is the default", CorrelatorOptions{MaxEvents: -1}, def},
		{"MaxEvents 1", CorrelatorOptions{MaxEvents: 1}, fields{4096, 25, 1, 600, 1. / 300.}},
		{"MaxIntervalInSeconds negative is the default", CorrelatorOptions{MaxIntervalInSeconds: -1}, def},
		{"MaxIntervalInSeconds beyond a Duration saturates", CorrelatorOptions{MaxIntervalInSeconds: math.MaxInt}, fields{4096, 25, 10, int(math.MaxInt64 / int64(time.Second)), 1. / 300.}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(tc.in)
			assert.Equal(t, tc.want, fields{o.LRUCacheSize, o.BurstSize, o.MaxEvents, o.MaxIntervalInSeconds, o.QPS})
			assert.NotPanics(t, func() { NewEventCorrelatorWithOptions(tc.in) })
		})
	}
}
