//go:build amd64 && !race

package fanout

// storeRelease stores v at p (head_release_amd64.s): a plain store, which
// on amd64 is ordered after every earlier load and store of the goroutine
// (total store order), so it publishes what the fast path wrote before it.
// An atomic store there is an XCHG, a full fence the fast path does not
// need (DESIGN.md, section 3): with one watcher it was a quarter of
// Action's time.
//
//go:noescape
func storeRelease(p *uint64, v uint64)
