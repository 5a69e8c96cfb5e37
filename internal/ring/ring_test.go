package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewRoundsUpToPowerOfTwo(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 1}, {1, 1}, {2, 2}, {3, 4}, {64, 64}, {100, 128}, {1000, 1024}} {
		assert.Equal(t, tc.want, New[int](tc.n).Cap(), "n=%d", tc.n)
	}
}

func TestCopyAcrossTheWrap(t *testing.T) {
	r := New[int](4)
	for s := uint64(0); s < 7; s++ {
		r.Put(s, int(s))
	}
	// Sequences 3..6 live in slots 3,0,1,2.
	tests := []struct {
		name     string
		from, to uint64
		dst      int
		want     []int
	}{
		{"whole window", 3, 7, 8, []int{3, 4, 5, 6}},
		{"bounded by dst", 3, 7, 2, []int{3, 4}},
		{"starts after wrap", 5, 7, 4, []int{5, 6}},
		{"empty range", 5, 5, 4, []int{}},
		{"empty dst", 3, 7, 0, []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]int, tc.dst)
			n := r.Copy(dst, tc.from, tc.to)
			assert.Equal(t, tc.want, dst[:n])
		})
	}
}

func TestGrowKeepsSequencesInPlace(t *testing.T) {
	r := New[int](4)
	for s := uint64(0); s < 7; s++ {
		r.Put(s, int(s))
	}
	g := r.Grow(16, 3, 7)
	assert.Equal(t, 16, g.Cap())
	dst := make([]int, 4)
	assert.Equal(t, 4, g.Copy(dst, 3, 7))
	assert.Equal(t, []int{3, 4, 5, 6}, dst)
	g.Put(7, 7) // the next sequence lands after them, without wrapping onto 3
	assert.Equal(t, 4, g.Copy(dst, 4, 8))
	assert.Equal(t, []int{4, 5, 6, 7}, dst)
	r.Copy(dst, 3, 7) // the old ring is untouched
	assert.Equal(t, []int{3, 4, 5, 6}, dst)
}
