package harness

import (
	"slices"
	"testing"
)

// A run with more samples than the bound keeps an evenly spaced subset of
// its sorted samples, with the same quantiles to within the spacing; a
// run with fewer keeps them all.
func TestThinKeepsTheQuantiles(t *testing.T) {
	sorted := make([]int64, 1_000_000)
	for i := range sorted {
		sorted[i] = int64(i)
	}
	kept := thin(sorted, 1000)
	if len(kept) != 1000 || !slices.IsSorted(kept) {
		t.Fatalf("%d kept, sorted %v", len(kept), slices.IsSorted(kept))
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		all, some := Percentile(sorted, q), Percentile(kept, q)
		if d := all - some; d < 0 || d > 1000 {
			t.Errorf("q=%v: %d of all, %d of the subset", q, all, some)
		}
	}
	few := []int64{1, 2, 3}
	if got := thin(few, 1000); !slices.Equal(got, few) {
		t.Errorf("thin of 3: %v", got)
	}
}

// Several latency cases of one system: the targets take the light rate's.
func TestLightLatencyIsTheLowestRate(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	high, light := latP(pull, 1, 900e3), latP(pull, 1, 30e3)
	high.LatencyRate, light.LatencyRate = 100_000, 10_000
	if c := lightLatency([]Case{high, light}, pull, 1); c == nil || *c.P99LatencyNs != 30e3 {
		t.Errorf("light latency: %+v", c)
	}
	if c := lightLatency([]Case{high, light}, pull, 4); c != nil {
		t.Errorf("4 producers: %+v", c)
	}
}
