package fifo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPopReturnsValuesInOrder(t *testing.T) {
	var q FIFO[int]
	q.PushSlice([]int{1, 2, 3})
	q.Push(4)
	dst := make([]int, 3)
	assert.Equal(t, 3, q.Pop(dst))
	assert.Equal(t, []int{1, 2, 3}, dst)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, 1, q.Pop(dst))
	assert.Equal(t, 4, dst[0])
	assert.Zero(t, q.Len())
	assert.Zero(t, q.Pop(dst))
}

func TestDropDiscardsOldest(t *testing.T) {
	var q FIFO[int]
	q.PushSlice([]int{1, 2, 3})
	assert.Equal(t, 2, q.Drop(2))
	assert.Equal(t, 1, q.Drop(5))
	assert.Zero(t, q.Len())
}

func TestPoppedValuesAreNotRetained(t *testing.T) {
	var q FIFO[*int]
	a, b := new(int), new(int)
	q.PushSlice([]*int{a, b})
	dst := make([]*int, 1)
	q.Pop(dst)
	for _, v := range q.buf[:q.head] {
		assert.Nil(t, v)
	}
	q.Pop(dst)
	assert.Zero(t, q.Len())
	for _, v := range q.buf[:cap(q.buf)] {
		assert.Nil(t, v, "an empty queue keeps its storage, cleared")
	}
}

func TestAlternatingPushPopStaysBounded(t *testing.T) {
	var q FIFO[int]
	dst := make([]int, 1)
	q.PushSlice([]int{0, 1, 2, 3})
	for i := range 10000 {
		q.Push(i)
		q.Pop(dst)
	}
	assert.Equal(t, 4, q.Len())
	assert.LessOrEqual(t, cap(q.buf), 64)
}

func TestNilQueueIsEmpty(t *testing.T) {
	var q *FIFO[int]
	assert.Zero(t, q.Len())
	assert.Zero(t, q.Pop(make([]int, 1)))
	assert.Zero(t, q.Drop(1))
}
