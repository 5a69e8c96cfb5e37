package harness

import (
	"runtime"
	"testing"
)

// kelindar has no close that drains: the sentinel ends the measurement
// once every handler has seen it, not counted, and the teardown leaves none
// of the library's goroutines (its subscribers and its ticker) running.
func TestKelindarEndsWithTheSentinelAndLeavesNoGoroutine(t *testing.T) {
	deliversAllAndLeavesNoGoroutine(t, Kelindar, 5)
}

// deliversAllAndLeavesNoGoroutine measures s with n watchers and 1,000
// values from 1 and from 4 producers, and wants every value delivered to
// every watcher and no goroutine left once the measurement returns.
func deliversAllAndLeavesNoGoroutine(t *testing.T, s System, n int) {
	t.Helper()
	for _, producers := range []int{1, 4} {
		base := runtime.NumGoroutine()
		smp, err := measure(variant{sys: s}, n, producers, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if smp.delivered != int64(n)*1000 || !smp.settled {
			t.Errorf("P=%d: delivered %d of %d, settled %v", producers, smp.delivered, n*1000, smp.settled)
		}
		if got := runtime.NumGoroutine(); got > base {
			t.Errorf("P=%d: %d goroutines after the measurement, %d before", producers, got, base)
		}
	}
}

// A kelindar handler cannot be left unread, so there is no stalled
// kelindar watcher.
func TestKelindarHasNoStalledWatcher(t *testing.T) {
	if _, err := Kelindar.start(2, 1, nil); err == nil {
		t.Error("kelindar started with a stalled watcher")
	}
}

// teivah delivers every value to every Listener, from several producers.
func TestTeivahDeliversEverything(t *testing.T) {
	smp, err := measure(variant{sys: Teivah}, 4, 4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if smp.delivered != 4*1000 || !smp.settled {
		t.Errorf("delivered %d of 4000, settled %v", smp.delivered, smp.settled)
	}
}

// go-disruptor delivers every value to every reader, in order of its
// ring, with one writer and with the shared sequencer of several, and
// leaves none of its readers' goroutines behind.
func TestDisruptorDeliversEverythingFromOneAndSeveralWriters(t *testing.T) {
	deliversAllAndLeavesNoGoroutine(t, Disruptor, 6)
}

// A go-disruptor reader cannot be left unread (the writer would wait for
// it for ever), and its ring holds a power of two values.
func TestDisruptorHasNoStalledWatcherAndARingOfAPowerOfTwo(t *testing.T) {
	if _, err := Disruptor.start(2, 1, nil); err == nil {
		t.Error("disruptor started with a stalled watcher")
	}
	odd := Disruptor
	odd.Queue = 100
	if _, err := odd.start(2, 0, nil); err == nil {
		t.Error("disruptor started with a ring of 100")
	}
	if err := (System{Name: SystemDisruptor, Strategy: StrategyWait, API: APIChan, Queue: DisruptorRing}).validate(); err == nil {
		t.Error("disruptor read through a channel was accepted")
	}
}
