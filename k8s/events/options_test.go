package events

import (
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Options follow the rule shared with k8s/record: a zero or negative size
// means client-go's default, taken from the core; a negative pause means
// none; New refuses nothing.
func TestOptionsNormaliseOutOfRangeValues(t *testing.T) {
	def := config{sleep: 10 * time.Second, queue: 1000, cacheSize: 4096}
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
		{"WithQueueLength 0 is the default", WithQueueLength(0), def},
		{"WithQueueLength negative is the default", WithQueueLength(-1), def},
		{"WithQueueLength 1", WithQueueLength(1), with(func(c *config) { c.queue = 1 })},
		{"WithQueueLength above the maximum is the maximum", WithQueueLength(fanout.MaxQueueLength + 1), with(func(c *config) { c.queue = fanout.MaxQueueLength })},
		{"WithCacheSize 0 is the default", WithCacheSize(0), def},
		{"WithCacheSize negative is the default", WithCacheSize(-1), def},
		{"WithCacheSize 1", WithCacheSize(1), with(func(c *config) { c.cacheSize = 1 })},
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

func TestRetriesAsClientGo(t *testing.T) {
	p := newConfig(nil).retry()
	assert.Equal(t, 12, p.MaxTries)
	assert.Equal(t, 10*time.Second, p.Sleep)
	assert.Equal(t, 0.25, p.Jitter, "each pause has up to 25% jitter")
	assert.False(t, p.RandomFirst)
}
