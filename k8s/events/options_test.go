package events

import (
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithSleepDuration, client-go's, normalises as client-go's does (a
// negative pause means none); WithCacheSize 0 means the default, as the
// core's CacheSize.
func TestOptionsNormaliseOutOfRangeValues(t *testing.T) {
	def := config{sleep: 10 * time.Second, queue: 1000, cacheSize: 4096, writers: 32}
	with := func(f func(*config)) config { c := def; f(&c); return c }
	for _, tc := range []struct {
		name string
		opt  Option
		want config
	}{
		{"no option", nil, def},
		{"WithSleepDuration 0 retries at once", WithSleepDuration(0), with(func(c *config) { c.sleep = 0 })},
		{"WithSleepDuration negative retries at once", WithSleepDuration(-time.Second), with(func(c *config) { c.sleep = 0 })},
		{"WithSleepDuration positive", WithSleepDuration(time.Second), with(func(c *config) { c.sleep = time.Second })},
		{"WithQueueLength 1", WithQueueLength(1), with(func(c *config) { c.queue = 1 })},
		{"WithQueueLength the maximum", WithQueueLength(fanout.MaxQueueLength), with(func(c *config) { c.queue = fanout.MaxQueueLength })},
		{"WithCacheSize 0 is the default", WithCacheSize(0), def},
		{"WithCacheSize 1", WithCacheSize(1), with(func(c *config) { c.cacheSize = 1 })},
		{"WithWriters 1", WithWriters(1), with(func(c *config) { c.writers = 1 })},
		{"WithWriters the maximum", WithWriters(fanout.MaxWriters), with(func(c *config) { c.writers = fanout.MaxWriters })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, newConfig([]Option{tc.opt}))
			b, err := New(newRecordingSink(), tc.opt)
			require.NoError(t, err)
			assert.Equal(t, tc.want.cacheSize, b.cacheSize)
			b.Shutdown()
		})
	}
}

// WithQueueLength, WithCacheSize and WithWriters, which client-go has not, make New
// return an error for what no setting can mean: a queue length of 0 is
// neither the default nor the core's hand-off queue.
func TestNewRefusesOutOfRangeQueueLengthAndCacheSize(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithQueueLength(0), "events: WithQueueLength(0): the length must be 1 to"},
		{WithQueueLength(-1), "events: WithQueueLength(-1): the length must be 1 to"},
		{WithQueueLength(fanout.MaxQueueLength + 1), "leave the option out for the default, 1000"},
		{WithCacheSize(-1), "events: WithCacheSize(-1): the size must be 0 (the default, 4096) or more"},
		{WithWriters(0), "events: WithWriters(0): the number must be 1 to"},
		{WithWriters(fanout.MaxWriters + 1), "leave the option out for the default, 32"},
	} {
		b, err := New(newRecordingSink(), tc.opt)
		assert.Nil(t, b)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestRetriesAsClientGo(t *testing.T) {
	p := newConfig(nil).retry()
	assert.Equal(t, 12, p.MaxTries)
	assert.Equal(t, 10*time.Second, p.Sleep)
	assert.Equal(t, 0.25, p.Jitter, "each pause has up to 25% jitter")
	assert.False(t, p.RandomFirst)
}
