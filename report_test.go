package fanout_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// reports collects wait reports.
type reports struct {
	mu   sync.Mutex
	list []fanout.WaitReport
}

func (r *reports) add(w fanout.WaitReport) { r.mu.Lock(); r.list = append(r.list, w); r.mu.Unlock() }

func (r *reports) get() []fanout.WaitReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fanout.WaitReport(nil), r.list...)
}

func TestWaitReportNamesTheWatcherThatBlocksThePublisher(t *testing.T) {
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got reports
				b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithWaitReport(time.Second, got.add))
				defer b.Shutdown()
				slow, err := b.Watch(fanout.WithName("slow"))
				require.NoError(t, err)
				rd.prepare(slow)
				publish(t, b, 1)
				done := make(chan error, 1)
				go func() { done <- b.Action(2) }()
				time.Sleep(999 * time.Millisecond)
				synctest.Wait()
				assert.Empty(t, got.get(), "not before the threshold")
				time.Sleep(time.Millisecond)
				synctest.Wait()
				require.Len(t, got.get(), 1)
				r := got.get()[0]
				assert.Equal(t, slow.ID(), r.WatcherID)
				assert.Equal(t, "slow", r.WatcherName)
				assert.Equal(t, 1, r.QueueLength)
				assert.Equal(t, 1, r.Queued)
				assert.Equal(t, time.Second, r.Waited)
				time.Sleep(time.Hour)
				synctest.Wait()
				assert.Len(t, got.get(), 1, "once per publish call")
				assert.Equal(t, uint64(1), b.Stats().WaitReports)
				rd.drain(slow)
				require.NoError(t, <-done)
			})
		})
	}
}

// The classic deadlock: a watcher's reader publishes into the broadcaster
// it reads while its own queue is full. The report shows it, with nobody
// reading that watcher.
func TestWaitReportShowsAReaderThatPublishesIntoItsOwnFullWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var got reports
		log := fanout.LogWaitReports(slog.New(slog.NewTextHandler(&buf, nil)))
		b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithWaitReport(time.Second, func(r fanout.WaitReport) {
			got.add(r)
			log(r)
		}))
		defer b.Shutdown()
		w, err := b.Watch(fanout.WithName("echo"))
		require.NoError(t, err)
		stuck := make(chan error, 1)
		go func() {
			v, err := w.Next(context.Background())
			if err == nil {
				// Two follow-ups: the first fills the queue of one, the
				// second waits for the reader, which is this goroutine.
				_, err = b.ActionBatch([]int{v + 1, v + 2})
			}
			stuck <- err
		}()
		publish(t, b, 1)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Len(t, got.get(), 1)
		assert.Equal(t, "echo", got.get()[0].WatcherName)
		assert.Zero(t, got.get()[0].Readers, "its only reader is the one waiting")
		assert.Contains(t, buf.String(), `msg="publisher waits for a full watcher"`)
		assert.Contains(t, buf.String(), "watcher_name=echo")
		w.Stop() // releases it
		require.NoError(t, <-stuck)
	})
}

func TestWaitReportIsAnOptionOfNewOnly(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	_, err := b.Watch(fanout.WithWaitReport(time.Second, func(fanout.WaitReport) {}))
	assert.ErrorContains(t, err, "WithWaitReport applies to New")
	bad := fanout.New[int](fanout.WithWaitReport(0, func(fanout.WaitReport) {}))
	assert.ErrorContains(t, bad.Action(1), "must be positive")
	none := fanout.New[int](fanout.WithWaitReport(0, nil))
	assert.NoError(t, none.Action(1), "a nil function is no report, whatever the threshold")
}

func TestWaitReportThatPanicsIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithWaitReport(time.Millisecond, func(fanout.WaitReport) { panic("report") }))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		publish(t, b, 1)
		done := make(chan error, 1)
		go func() { done <- b.Action(2) }()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, uint64(1), b.Stats().Panics)
		_, _ = w.Next(context.Background())
		require.NoError(t, <-done, "the publish goes on")
	})
}

// The report is once per publish call and watcher: a batch that was
// reported waiting for one watcher, and then waits for another, names that
// other one too, on both read paths.
func TestWaitReportNamesEachWatcherThatBlocksOnePublishCall(t *testing.T) {
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got reports
				b := fanout.New[int](fanout.WithWaitReport(time.Second, got.add))
				defer b.Shutdown()
				first, err := b.Watch(fanout.WithName("first"), fanout.WithQueueLength(1))
				require.NoError(t, err)
				second, err := b.Watch(fanout.WithName("second"), fanout.WithQueueLength(2))
				require.NoError(t, err)
				rd.prepare(first)
				rd.prepare(second)
				publish(t, b, 0) // first is full, second has room for one
				done := make(chan error, 1)
				go func() { _, err := b.ActionBatch([]int{1, 2}); done <- err }()
				time.Sleep(time.Hour)
				synctest.Wait()
				require.Len(t, got.get(), 1)
				assert.Equal(t, "first", got.get()[0].WatcherName)
				assert.Equal(t, []int{0}, fanouttest.Collect(t, first, 1)) // 1 is accepted; 2 waits for both
				time.Sleep(time.Hour)
				synctest.Wait()
				names := map[string]int{}
				for _, r := range got.get() {
					names[r.WatcherName]++
				}
				assert.Equal(t, map[string]int{"first": 1, "second": 1}, names)
				assert.Equal(t, uint64(2), b.Stats().WaitReports)
				first.Stop()
				second.Stop()
				require.NoError(t, <-done)
			})
		})
	}
}
