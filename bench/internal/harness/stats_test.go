package harness

import (
	"math"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1, 10, 1000}, 10},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := Median(in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("Median modified its input: %v became %v", tt.in, in)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestPercentile(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(i + 1)
	}
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := Percentile(s, tt.q); got != tt.want {
			t.Errorf("Percentile(1..1000, %v) = %d, want %d", tt.q, got, tt.want)
		}
	}
	if got := Percentile([]int64{7}, 0.99); got != 7 {
		t.Errorf("Percentile of one sample = %d, want 7", got)
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %d, want 0", got)
	}
}

func TestSpread(t *testing.T) {
	if got := Spread([]float64{90, 100, 110}); math.Abs(got-20) > 1e-9 {
		t.Errorf("Spread(90,100,110) = %v, want 20", got)
	}
	if got := Spread([]float64{42}); got != 0 {
		t.Errorf("Spread of one value = %v, want 0", got)
	}
}
