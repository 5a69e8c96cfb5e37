package fanout_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// readers are the two ways of consuming a watcher: the k8s-compatible
// channel and the pull API. Most semantics must hold for both.
var readers = []struct {
	name string
	// prepare is called right after Watch; collect reads n values.
	prepare func(w *fanout.Watcher[int])
	drain   func(w *fanout.Watcher[int]) []int
}{
	{
		name:    "chan",
		prepare: func(w *fanout.Watcher[int]) { w.ResultChan() },
		drain: func(w *fanout.Watcher[int]) []int {
			v, _ := fanouttest.DrainChan(w.ResultChan())
			return v
		},
	},
	{
		name:    "pull",
		prepare: func(*fanout.Watcher[int]) {},
		drain:   fanouttest.Drain[int],
	},
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func publish(t *testing.T, b *fanout.Broadcaster[int], vals ...int) {
	t.Helper()
	for _, v := range vals {
		require.NoError(t, b.Action(v))
	}
}
