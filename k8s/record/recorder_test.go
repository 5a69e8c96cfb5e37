package record_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// A typed nil *v1.ObjectReference, which client-go's reference lookup
// returns as is with no error, is logged and counted as invalid instead of
// being dereferenced on the caller's goroutine.
func TestTypedNilObjectReferenceIsCountedInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		var nilRef *v1.ObjectReference
		p := panicValue(func() { r.Event(nilRef, v1.EventTypeNormal, "R", "typed nil reference") })
		require.Nil(t, p)
		flush(t, b)
		assert.Empty(t, sink.Calls())
		assert.Equal(t, uint64(1), b.Stats().Invalid)
	})
}

// panicValue runs f and returns what it panicked with, if anything.
func panicValue(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
