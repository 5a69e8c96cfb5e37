package fanouttest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHelpers(t *testing.T) {
	var b *fanout.Broadcaster[int]
	t.Run("cleanup shuts down", func(t *testing.T) {
		b = fanouttest.New[int](t)
		w := fanouttest.Watch(t, b)
		require.NoError(t, b.Action(1))
		require.NoError(t, b.Action(2))
		assert.Equal(t, []int{1}, fanouttest.Collect(t, w, 1))
		assert.Equal(t, []int{2}, fanouttest.Drain(w))
		assert.Empty(t, fanouttest.Drain(w))
	})
	assert.ErrorIs(t, b.Action(3), fanout.ErrStopped, "New registered Shutdown with t.Cleanup")

	t.Run("collect all", func(t *testing.T) {
		b := fanouttest.New[int](t)
		w := fanouttest.Watch(t, b)
		require.NoError(t, b.Action(1))
		b.Shutdown()
		got, err := fanouttest.CollectAll(t, w)
		assert.Equal(t, []int{1}, got)
		assert.ErrorIs(t, err, fanout.ErrStopped)
	})

	t.Run("drain chan", func(t *testing.T) {
		ch := make(chan int, 2)
		ch <- 1
		vals, closed := fanouttest.DrainChan(ch)
		assert.Equal(t, []int{1}, vals)
		assert.False(t, closed)
		close(ch)
		_, closed = fanouttest.DrainChan(ch)
		assert.True(t, closed)
	})
}

// fakeTB records Fatalf instead of stopping the test.
type fakeTB struct {
	cleanups []func()
	fatal    string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(f)
}

func (f *fakeTB) run(fn func()) {
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		for i := len(f.cleanups) - 1; i >= 0; i-- {
			f.cleanups[i]()
		}
	}()
	fn()
}

func TestHelpersFailInsteadOfHanging(t *testing.T) {
	tb := &fakeTB{}
	tb.run(func() {
		b := fanouttest.New[int](tb)
		w := fanouttest.Watch(tb, b)
		require.NoError(t, b.Action(1))
		w.Stop()
		fanouttest.Collect(tb, w, 2)
	})
	assert.Contains(t, tb.fatal, "got 1 of 2 values")

	tb = &fakeTB{}
	tb.run(func() {
		b := fanouttest.New[int](tb, fanout.WithQueueLength(-1))
		fanouttest.Watch(tb, b)
	})
	assert.Contains(t, tb.fatal, "invalid queue length")
}
