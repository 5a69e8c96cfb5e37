package harness

import (
	"runtime"
	"testing"
)

// kelindar has no close that drains: the sentinel ends the measurement
// once every handler has seen it, not counted, and the teardown leaves none
// of the library's goroutines (its subscribers and its ticker) running.
func TestKelindarEndsWithTheSentinelAndLeavesNoGoroutine(t *testing.T) {
	for _, producers := range []int{1, 4} {
		base := runtime.NumGoroutine()
		smp, err := measure(variant{sys: Kelindar}, 5, producers, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if smp.delivered != 5*1000 || !smp.settled {
			t.Errorf("P=%d: delivered %d of 5000, settled %v", producers, smp.delivered, smp.settled)
		}
		if n := runtime.NumGoroutine(); n > base {
			t.Errorf("P=%d: %d goroutines after the measurement, %d before", producers, n, base)
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
	for _, producers := range []int{1, 4} {
		base := runtime.NumGoroutine()
		smp, err := measure(variant{sys: Disruptor}, 6, producers, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if smp.delivered != 6*1000 || !smp.settled {
			t.Errorf("P=%d: delivered %d of 6000, settled %v", producers, smp.delivered, smp.settled)
		}
		if n := runtime.NumGoroutine(); n > base {
			t.Errorf("P=%d: %d goroutines after the measurement, %d before", producers, n, base)
		}
	}
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
