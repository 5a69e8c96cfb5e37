package exporter

import (
	"maps"
	"sync"
)

// change is one step of the source's state, in Seq order: an occurrence
// forwarded (or judged: routed nowhere), an event deleted, or (without a
// uid) progress to a resource version.
type change struct {
	seq     uint64
	uid     string
	count   int32
	rv      string
	deleted bool
}

// tracker keeps what has been forwarded: the state every sink has finished
// with (committed), and the changes after it (pending), in Seq order. The
// source adds changes; the checkpoint goroutine commits them once the
// watermark of the sinks passes them.
type tracker struct {
	mu        sync.Mutex
	pending   []change
	off       int // pending[off:] are not committed
	committed map[string]int32
	rv        string
	seq       uint64 // last Seq given out
	through   uint64 // last Seq committed
	saved     uint64 // last Seq a written checkpoint covers
	changed   bool   // committed changed since takeChanged
}

func newTracker(ck *Checkpoint) *tracker {
	t := &tracker{committed: map[string]int32{}}
	if ck != nil {
		maps.Copy(t.committed, ck.Counts)
		t.rv = ck.ResourceVersion
	}
	return t
}

// add records a change and returns its Seq.
func (t *tracker) add(c change) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	c.seq = t.seq
	t.pending = append(t.pending, c)
	return c.seq
}

// commit applies the pending changes with Seq <= w and reports whether any
// were applied.
func (t *tracker) commit(w uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := t.off
	for t.off < len(t.pending) && t.pending[t.off].seq <= w {
		c := t.pending[t.off]
		switch {
		case c.uid == "": // progress only
		case c.deleted:
			delete(t.committed, c.uid)
		default:
			t.committed[c.uid] = c.count
		}
		if c.rv != "" {
			t.rv = c.rv
		}
		t.through = c.seq
		t.off++
	}
	if t.off > 1024 && t.off*2 > len(t.pending) {
		// Keep the backing array bounded by the pending changes.
		n := copy(t.pending, t.pending[t.off:])
		clear(t.pending[n:])
		t.pending, t.off = t.pending[:n], 0
	}
	if t.off != start {
		t.changed = true
	}
	return t.off != start
}

// takeChanged reports whether commits changed the state since the last
// call.
func (t *tracker) takeChanged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.changed
	t.changed = false
	return c
}

// snapshot returns the committed state as a checkpoint (without marks).
func (t *tracker) snapshot() *Checkpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &Checkpoint{Version: checkpointVersion, ResourceVersion: t.rv, Counts: maps.Clone(t.committed), Seq: t.through}
}

// committedThrough returns the last Seq committed.
func (t *tracker) committedThrough() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.through
}

// savedThrough records that a checkpoint covering the changes through
// seq was written.
func (t *tracker) savedThrough(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.saved = max(t.saved, seq)
}

// saveFailed records that writing the committed state failed, so that
// the next takeChanged reports it again even if nothing more is
// committed by then.
func (t *tracker) saveFailed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.changed = true
}

// lag returns the number of changes no written checkpoint covers: those
// not committed yet, and those committed since the last checkpoint
// written (all of them while every write fails).
func (t *tracker) lag() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.seq - t.saved)
}
