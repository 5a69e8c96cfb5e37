//go:build fanoutcheck

package fanout

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A wait that no publisher times counts from the first Snapshot that saw
// it. Two Snapshots race: the one that started first takes the lock after
// the other one stamped the wait; its wait must not be negative. It needs
// the fanoutcheck build tag (hooks.go):
//
//	go test -race -tags fanoutcheck -run TestSnapshot .
func TestSnapshotThatLocksLastNeverShowsANegativeWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		slow, err := b.Watch(WithName("slow"))
		require.NoError(t, err)
		require.NoError(t, b.Action(0))
		done := async(func() error { return b.Action(1) })
		synctest.Wait()
		reached, resume := pauseAt(t, hookSnapshotLocking)
		first := make(chan Snapshot, 1)
		go func() { first <- b.Snapshot() }()
		<-reached
		time.Sleep(time.Second)
		require.Len(t, b.Snapshot().Waiting, 1, "the second Snapshot stamps the wait")
		resume()
		s := <-first
		require.Len(t, s.Waiting, 1)
		assert.GreaterOrEqual(t, s.Waiting[0].Waited, time.Duration(0))
		_, err = slow.Next(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-done)
	})
}
