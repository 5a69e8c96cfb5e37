//go:build !amd64 || race

package fanout

import "sync/atomic"

// storeRelease stores v at p. Elsewhere than amd64, and under the race
// detector (which does not see a store made in assembly), it is an atomic
// store.
func storeRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
