package harness

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
)

// Every replay system gives each late joiner the last h values in order:
// measureReplay checks them, so no error means they were right.
func TestMeasureReplay(t *testing.T) {
	for _, s := range ReplaySystems() {
		smp, err := measureReplay(s, 50, 3)
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		if smp.joins != 3 || smp.values != 150 || smp.elapsed <= 0 || smp.perSec() <= 0 || smp.nsPerValue() <= 0 || !smp.settled {
			t.Errorf("%s: %+v", s.Label(), smp)
		}
	}
	if _, err := measureReplay(Fanout(StrategyWait, APIPull), 50, 1); err == nil {
		t.Error("measureReplay of a system that is no replay system: no error")
	}
}

// A joiner that gets other values than the last h in order is an error,
// not a figure.
func TestRecvAllChecksTheValues(t *testing.T) {
	b := fanout.New[*Event](fanout.WithHistory(4))
	defer b.Shutdown()
	for _, v := range replayPayload(6) {
		if err := b.Action(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := b.Watch(fanout.WithReplay(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := recvAll(ctx, w, make([]*Event, 3), 4, 2); err != nil {
		t.Errorf("the last 4 of 6: %v", err)
	}
	w.Stop()
	w, err = b.Watch(fanout.WithReplay(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := recvAll(ctx, w, make([]*Event, 3), 4, 1); !errors.Is(err, errReplay) {
		t.Errorf("values from 2, want from 1: %v", err)
	}
	w.Stop()
	// Fewer values than asked for: the watcher is drained, then closed.
	w, err = b.Watch(fanout.WithReplay(2))
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if err := recvAll(ctx, w, make([]*Event, 3), 4, 4); !errors.Is(err, errReplay) {
		t.Errorf("2 values of 4: %v", err)
	}
}

// The application's history is the last values, oldest first, before and
// after the ring wraps.
func TestAppHistory(t *testing.T) {
	a := newAppHistory[int](3)
	for v := range 2 {
		a.add(v)
	}
	if got := a.last(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("before wrapping: %v", got)
	}
	for v := 2; v < 7; v++ {
		a.add(v)
	}
	if got := a.last(); !slices.Equal(got, []int{4, 5, 6}) {
		t.Errorf("after wrapping: %v", got)
	}
}

func TestCalibrateJoins(t *testing.T) {
	if got, err := calibrateJoins(Config{Events: 250}, ReplayFanout, 100); err != nil || got != 2 {
		t.Errorf("fixed events: %d joins, %v; want 2", got, err)
	}
	got, err := calibrateJoins(Config{Target: time.Millisecond}, ReplayFanout, 100)
	if err != nil || got < 10 {
		t.Errorf("calibrated: %d joins, %v; want at least 10", got, err)
	}
}
