package harness

import (
	"errors"
	"slices"
	"testing"
)

// The idle-CPU group keeps each figure's lowest over its rounds, so that a
// second that something else landed in does not stand for a system's idle
// cost; an error in any round ends it.
func TestIdleCPUKeepsEachFiguresLowestOverTheRounds(t *testing.T) {
	rounds := [][]float64{{5, 1, 3}, {2, 4, 3}, {6, 0.5, 9}}
	i := 0
	low, err := lowestOfRounds(len(rounds), func() ([]float64, error) { i++; return slices.Clone(rounds[i-1]), nil })
	if err != nil || !slices.Equal(low, []float64{2, 0.5, 3}) {
		t.Errorf("lowest of %v: %v, %v", rounds, low, err)
	}
	boom := errors.New("boom")
	if _, err := lowestOfRounds(2, func() ([]float64, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("a failing round: %v", err)
	}
}
