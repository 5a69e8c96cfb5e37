package harness

import "testing"

// Watcher i keeps the values v with v%10 == i%10, whether a filter or the
// watcher's reader discards the others: with watchers a multiple of 10,
// every value is counted by a tenth of them, and nothing is lost.
func TestFilterSystemsCountEachWatchersShare(t *testing.T) {
	for _, s := range FilterSystems() {
		const n, events = 20, 503
		smp, err := measure(variant{sys: s}, n, 1, events)
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		if smp.expected != events*n/FilterShare || smp.delivered != smp.expected || !smp.settled {
			t.Errorf("%s: delivered %d, expected %d (want %d), settled %v", s.Label(), smp.delivered, smp.expected,
				events*n/FilterShare, smp.settled)
		}
	}
}

func TestMineKeepsOneValueInTen(t *testing.T) {
	for i := range 30 {
		kept := 0
		for v := range 100 {
			if mine(i, &Event{Stamp: int64(v)}) {
				kept++
				if v%FilterShare != i%FilterShare {
					t.Errorf("watcher %d keeps %d", i, v)
				}
			}
		}
		if kept != 100/FilterShare {
			t.Errorf("watcher %d keeps %d values of 100", i, kept)
		}
	}
}
