//go:build !fanoutcheck

package fanout

import "sync"

// Without the fanoutcheck build tag, the checks and hooks are empty: the
// compiler inlines them away, so that they cost nothing.

// The engine's locks are plain mutexes. Under the fanoutcheck build tag
// they are wrappers that panic when a goroutine takes them out of the
// order of DESIGN.md, section 3 (check_on.go): Broadcaster.mu, Watcher.mu,
// chanState.sendMu, Broadcaster.roomMu, Broadcaster.parkMu, the last a
// leaf.
type (
	watcherMu = sync.Mutex
	sendMu    = sync.Mutex
	roomMu    = sync.Mutex
	parkMu    = sync.Mutex
)

// broadcasterMu is Broadcaster.mu, which also holds the busy bit of
// Broadcaster.head while it is locked (head.go).
// The mutex is a named field, not embedded, so that no method of it (such
// as TryLock) can take the lock without the bit.
type broadcasterMu struct {
	mu   sync.Mutex
	head *headWord
}

func (m *broadcasterMu) Lock() {
	m.mu.Lock()
	m.head.hold()
}

func (m *broadcasterMu) Unlock() {
	m.head.releaseHeld()
	m.mu.Unlock()
}

// hook marks a decision point of the protocol where a test may pause the
// goroutine (check_on.go).
func hook(hookPoint) {}

// checkDrained checks a closed ring reader's accounts once drained.
func (w *Watcher[T]) checkDrained(uint64) {}

// setCheck is called by New to set up the checks of b.
func (b *Broadcaster[T]) setCheck() {}

// checkState is empty: nothing is kept for the checks.
//
//lint:ignore U1000 the fanoutcheck build's state (check_on.go)
type checkState struct{}
