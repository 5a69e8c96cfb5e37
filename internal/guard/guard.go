// Package guard holds the two helpers every module of the repository needs
// around user code and waits: running a callback with its panic turned
// into an error, and sleeping unless a context ends first. The core, the
// k8s adapters, the NATS module and the exporter (through the core's
// runner) use these, so that a fix to either is made once. The nested
// modules may import it: Go allows an internal package to be imported by
// code whose import path is rooted at the internal directory's parent,
// whatever module it is in.
package guard

import (
	"context"
	"fmt"
	"time"
)

// Call runs f and returns the panic it raised, if any, as an error (nil
// otherwise), so that a panicking sink, handler or callback cannot take
// its caller down.
func Call(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = PanicError(p)
		}
	}()
	f()
	return nil
}

// PanicError turns a recovered panic value into an error.
func PanicError(p any) error {
	if err, ok := p.(error); ok {
		return fmt.Errorf("fanout: panic: %w", err)
	}
	return fmt.Errorf("fanout: panic: %v", p)
}

// Sleep waits for d, and reports whether it did: false if ctx ended first.
// A d of zero or less returns at once, true unless ctx has ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
