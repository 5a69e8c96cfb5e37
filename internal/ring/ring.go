// Package ring holds the fixed-size, sequence-indexed buffer behind the
// broadcaster's shared delivery path.
//
// A Ring does no synchronisation of its own: the broadcaster publishes a
// sequence number with an atomic store after writing its slot, and a reader
// publishes its cursor with an atomic store after copying slots out. Those two
// stores are what make concurrent Put and Copy race-free; the broadcaster never
// overwrites a slot that a registered reader has not yet passed.
package ring

// Ring is a power-of-two array of T addressed by an ever-growing sequence
// number: sequence s lives in slot s&mask.
type Ring[T any] struct {
	buf  []T
	mask uint64
}

// New returns a ring with room for at least n values (rounded up to a power
// of two, minimum 1).
func New[T any](n int) *Ring[T] {
	size := 1
	for size < n {
		size <<= 1
	}
	return &Ring[T]{buf: make([]T, size), mask: uint64(size - 1)}
}

// Cap returns the number of slots.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// Put stores v as sequence s, overwriting sequence s-Cap().
func (r *Ring[T]) Put(s uint64, v T) { r.buf[s&r.mask] = v }

// Copy copies the values of sequences [from, to) into dst, at most len(dst)
// of them, and returns how many it copied. It handles the wrap-around with at
// most two copy calls.
func (r *Ring[T]) Copy(dst []T, from, to uint64) int {
	if to <= from {
		return 0
	}
	n := to - from
	if uint64(len(dst)) < n {
		n = uint64(len(dst))
	}
	if n == 0 {
		return 0
	}
	start := from & r.mask
	first := copy(dst[:n], r.buf[start:])
	if uint64(first) < n {
		copy(dst[first:n], r.buf)
	}
	return int(n)
}

// Grow returns a ring with room for at least n values (rounded up to a power
// of two) holding the values of sequences [from, to) of r, which must be at
// most r.Cap() of them. r is not changed: readers may go on copying from it.
func (r *Ring[T]) Grow(n int, from, to uint64) *Ring[T] {
	g := New[T](n)
	for s := from; s < to; s++ {
		g.buf[s&g.mask] = r.buf[s&r.mask]
	}
	return g
}
