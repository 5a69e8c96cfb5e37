package harness

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for an empty slice. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the
// nearest-rank method: the smallest sample such that at least q of all
// samples are at or below it. It returns 0 for an empty slice.
func Percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Spread returns (max-min)/median of xs, in percent: how much the
// repetitions of one measurement disagreed. It returns 0 for fewer than two
// values.
func Spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := Median(xs)
	if m == 0 {
		return 0
	}
	return 100 * (slices.Max(xs) - slices.Min(xs)) / m
}
