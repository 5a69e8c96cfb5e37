package fanout_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// A panic in Clone or Merge while WriteOpen copies or settles a record is
// a failed write reported to the LossCounter, not a panic out of
// WriteOpen: the owner's maintenance goroutine would crash the process.
// The record keeps its merged values, and a later sweep writes them.
func TestWriteOpenReportsAPanicInCloneOrMergeAsAFailedWrite(t *testing.T) {
	for _, where := range []string{"Clone", "Merge"} {
		t.Run(where, func(t *testing.T) {
			var boom atomic.Bool
			var c *fanout.Correlator[int]
			c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[int]{
				Clone: func(v int) int {
					if where == "Clone" && boom.Load() {
						panic("clone")
					}
					return v
				},
				Dedup: &fanout.DedupStage[int]{
					Key: func(int) string { return "k" },
					Merge: func(_ int, n int, _ time.Time) int {
						if where == "Merge" && boom.Load() {
							panic("merge")
						}
						return n
					},
					WriteFirst: 1,
				}})
			require.NoError(t, err)
			losses := &lossLog{}
			require.NoError(t, c.ReportLossesTo(losses))
			c.Correlate(1)
			require.True(t, c.Correlate(2).Merged)
			write := func(_ context.Context, v int) (int, error) { return v, nil }
			if where == "Merge" {
				// An occurrence during the write: settling it marks the
				// stored record again with Merge.
				write = func(_ context.Context, v int) (int, error) {
					require.True(t, c.Correlate(3).Merged)
					boom.Store(true)
					return v, nil
				}
			} else {
				boom.Store(true)
			}
			assert.NotPanics(t, func() {
				assert.NoError(t, c.WriteOpen(context.Background(), fanout.Sweep[int]{Write: write}))
			})
			lost, failures := losses.get()
			assert.Equal(t, 1, failures, "the panic is a failed write")
			assert.Empty(t, lost, "nothing is lost")

			boom.Store(false)
			var written []int
			require.NoError(t, c.WriteOpen(context.Background(), fanout.Sweep[int]{Unwritten: true,
				Write: func(_ context.Context, v int) (int, error) { written = append(written, v); return v, nil }}))
			assert.Len(t, written, 1, "a later sweep writes the merged values left")
		})
	}
}

// panicClock is a Clock that panics once armed.
type panicClock struct{ armed atomic.Bool }

func (c *panicClock) Now() time.Time {
	if c.armed.Load() {
		panic("clock")
	}
	return time.Now()
}

// A panic in the correlator's Clock while WriteOpen looks for open records
// is returned as WriteOpen's error, with nothing written: it reached the
// caller's goroutine.
func TestWriteOpenReturnsAPanicInTheClockAsAnError(t *testing.T) {
	clock := &panicClock{}
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[int]{
		Clock: clock,
		Dedup: &fanout.DedupStage[int]{Key: func(int) string { return "k" }, Merge: func(_ int, n int, _ time.Time) int { return n }, WriteFirst: 1},
	})
	require.NoError(t, err)
	c.Correlate(1)
	require.True(t, c.Correlate(2).Merged)
	clock.armed.Store(true)
	writes := 0
	assert.NotPanics(t, func() {
		err = c.WriteOpen(context.Background(), fanout.Sweep[int]{Write: func(_ context.Context, v int) (int, error) { writes++; return v, nil }})
	})
	assert.ErrorContains(t, err, "clock")
	assert.Zero(t, writes)
}
