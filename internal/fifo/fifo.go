// Package fifo holds a small first-in, first-out queue of values, the private
// queue of a watcher: values it holds outside the broadcaster's shared ring
// (a prefix, or values moved out of the ring before they are overwritten).
package fifo

// FIFO is a queue of T. The zero value is an empty queue, and so is a nil
// *FIFO for Len, Pop and Drop. It does no synchronisation of its own.
type FIFO[T any] struct {
	buf  []T
	head int
}

// Len returns the number of values queued.
func (q *FIFO[T]) Len() int {
	if q == nil {
		return 0
	}
	return len(q.buf) - q.head
}

// Push appends v.
func (q *FIFO[T]) Push(v T) { q.buf = append(q.buf, v) }

// PushSlice appends vs, in order.
func (q *FIFO[T]) PushSlice(vs []T) { q.buf = append(q.buf, vs...) }

// Front returns the oldest value, and false if the queue is empty.
func (q *FIFO[T]) Front() (v T, ok bool) {
	if q.Len() == 0 {
		return v, false
	}
	return q.buf[q.head], true
}

// Pop moves up to len(dst) of the oldest values into dst and returns how
// many it moved. Their slots are cleared, so that the queue keeps no
// reference to a value it no longer holds.
func (q *FIFO[T]) Pop(dst []T) int {
	if q == nil {
		return 0
	}
	n := copy(dst, q.buf[q.head:])
	clear(q.buf[q.head : q.head+n])
	q.head += n
	q.compact()
	return n
}

// Drop discards up to n of the oldest values and returns how many it
// discarded.
func (q *FIFO[T]) Drop(n int) int {
	if q == nil {
		return 0
	}
	n = min(n, q.Len())
	clear(q.buf[q.head : q.head+n])
	q.head += n
	q.compact()
	return n
}

// compact rewinds an empty queue, keeping its storage for the next values,
// and moves the values to the front once more than half of the storage is
// spent, so that a queue that is pushed and popped in turn does not grow
// without bound.
func (q *FIFO[T]) compact() {
	switch {
	case q.head == len(q.buf):
		q.buf, q.head = q.buf[:0], 0
	case q.head > len(q.buf)/2:
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}
