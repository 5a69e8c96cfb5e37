package fanout

import (
	"fmt"
	"maps"
	"time"

	"github.com/fanout-go/fanout/internal/guard"
)

// Snapshot is what a [Broadcaster] looks like at one moment: its counters,
// each registered watcher's, and the publish calls waiting now for a full
// watcher. It holds names and counts, never a value. The live view of the
// package github.com/fanout-go/fanout/debug is made of snapshots.
type Snapshot struct {
	// Stats are the broadcaster's counters ([Broadcaster.Stats]).
	Stats Stats
	// Watchers are the registered watchers, in the order they registered
	// (ring readers first, then those read through ResultChan).
	Watchers []WatcherSnapshot
	// Waiting lists, for each publish call waiting now for full watchers,
	// each watcher it waits for: who holds the publishers back.
	Waiting []Wait
	// Publishers counts the publish calls asleep now, waiting for full
	// watchers: those of Waiting (a call waits for one watcher or more),
	// and any that a reader has just woken and that has not run yet.
	Publishers int
	// TurnQueue counts the publish calls queued for the publish turn
	// behind the one that holds it (see "Waiting" in the package
	// documentation): held back by that one.
	TurnQueue int
}

// WatcherSnapshot is one watcher in a [Snapshot]: its counters, and how it
// is set up and read.
type WatcherSnapshot struct {
	WatcherStats
	// Behavior names its full-queue strategy ([FullChannelBehavior]): the
	// String of a built-in ("WaitIfChannelFull", ...), of a user's
	// behaviour that has one, else its Go type.
	Behavior string
	// Channel is true for a watcher read through [Watcher.ResultChan].
	Channel bool
	// Readers counts the goroutines parked in its pull methods, waiting
	// for a value (0 for a channel watcher, whose readers cannot be seen).
	Readers int
}

// Wait is a publish call waiting now for a full watcher, as a [Snapshot]
// sees it: the data of a [WaitReport] (which watcher, its queue, how long,
// its parked readers), with the value's sequence number. A call that
// waits for several watchers has one Wait for each.
type Wait struct {
	WaitReport
	// Seq is the sequence number the waiting value will take.
	Seq uint64
	// Timed is true when Waited counts from when the call first had to
	// wait. A broadcaster times the waits for a [WaitIfChannelFull]
	// watcher only with [WithWaitReport] (or a watcher whose wait is
	// bounded), to keep a clock read off that path; otherwise Waited
	// counts from when a Snapshot first saw the wait, and is a lower
	// bound.
	Timed bool
}

// Snapshot returns the broadcaster's [Stats], each registered watcher's
// [WatcherSnapshot] and the calls waiting now ([Wait]). It changes nothing
// the broadcaster does (but the drops it settles, as Stats does), and costs
// what Stats and each [Watcher.Stats] cost: it holds the broadcaster's lock
// for Stats, then once more to list the watchers and the waits, each time
// for O(watchers); the watchers' own counters are read after, as
// [Watcher.Stats] reads them (a channel watcher's under the lock, briefly).
func (b *Broadcaster[T]) Snapshot() Snapshot {
	s := Snapshot{Stats: b.Stats()}
	hook(hookSnapshotLocking)
	b.mu.Lock()
	// now is read under the lock: a wait's since is stamped with the now
	// of the Snapshot that first saw it (under the lock), so it is never
	// later than the now of one that takes the lock after.
	now := time.Now()
	rs := append([]*Watcher[T](nil), b.readers...)
	cs := make([]*Watcher[T], len(b.chans))
	for i := range b.chans {
		cs[i] = b.chans[i].w
	}
	blk := b.blockersLocked(now)
	s.TurnQueue, s.Publishers = len(b.turnQ), len(b.waits)
	b.mu.Unlock() // nothing fastBound reads changed
	s.Watchers = make([]WatcherSnapshot, 0, len(rs)+len(cs))
	for _, w := range rs {
		s.Watchers = append(s.Watchers, w.snapshot(false))
	}
	for _, w := range cs {
		s.Watchers = append(s.Watchers, w.snapshot(true))
	}
	for _, bl := range blk {
		st := bl.w.Stats()
		s.Waiting = append(s.Waiting, Wait{WaitReport: WaitReport{WatcherID: st.ID, WatcherName: st.Name,
			QueueLength: st.QueueLength, Queued: st.Queued, Waited: now.Sub(bl.since),
			Readers: int(bl.w.waiters.Load())}, Seq: bl.seq, Timed: bl.timed})
	}
	return s
}

// snapshot returns the watcher's part of a Snapshot. Caller holds no lock.
func (w *Watcher[T]) snapshot(channel bool) WatcherSnapshot {
	s := WatcherSnapshot{WatcherStats: w.Stats(), Behavior: behaviorName(w.kind, w.behavior), Channel: channel}
	if !channel {
		s.Readers = int(w.waiters.Load())
	}
	return s
}

// behaviorName names a full-queue behaviour: a built-in's String, a user's
// (recovered if it panics), else its Go type.
func behaviorName(k kind, b FullChannelBehavior) (name string) {
	s, ok := b.(fmt.Stringer)
	if ok && k != kindCustom {
		return s.String()
	}
	name = fmt.Sprintf("%T", b)
	if ok { // a user's String that panics leaves the type's name
		_ = guard.Call(func() { name = s.String() })
	}
	return name
}

// RunnerSnapshot is a [Runner]'s counters with the watcher it reads, so
// that a view can show the runner beside that watcher.
type RunnerSnapshot struct {
	// WatcherID and Name are those of the runner's watcher ([Watcher.ID])
	// and of the runner: a [Recorder]'s are named "sink <type>" or
	// "handler", a batch runner's by [BatchConfig].Name.
	WatcherID uint64
	Name      string
	Stats     RunnerStats
}

// Snapshot returns the runner's [RunnerStats] with its watcher's ID and
// its name. It costs what [Runner.Stats] costs.
func (run *Runner[T]) Snapshot() RunnerSnapshot {
	return RunnerSnapshot{WatcherID: run.w.ID(), Name: run.name, Stats: run.Stats()}
}

// RecorderSnapshot is what a [Recorder] looks like at one moment: its
// counters, its broadcaster's snapshot (each runner is a watcher there)
// and its running runners'.
type RecorderSnapshot struct {
	Stats       RecorderStats
	Broadcaster Snapshot
	Runners     []RunnerSnapshot
}

// Snapshot returns the recorder's [RecorderStats], the [Snapshot] of its
// broadcaster and a [RunnerSnapshot] of each running runner. It costs what
// [Recorder.Stats] and [Broadcaster.Snapshot] cost.
func (r *Recorder[T]) Snapshot() RecorderSnapshot {
	var runs []RunnerSnapshot
	s := r.snapshot(func(run *Runner[T], rs RunnerStats) {
		runs = append(runs, RunnerSnapshot{WatcherID: run.w.ID(), Name: run.name, Stats: rs})
	})
	return RecorderSnapshot{Stats: s, Broadcaster: r.b.Snapshot(), Runners: runs}
}

// TopicsSnapshot is what a [Topics] looks like at one moment: its counters
// and each topic's [Snapshot].
type TopicsSnapshot[K comparable] struct {
	Stats  TopicsStats
	Topics map[K]Snapshot
}

// Snapshot returns the family's [TopicsStats] and the [Snapshot] of each
// topic that exists now. It holds the family's lock only to list the
// topics; each topic's snapshot costs what [Broadcaster.Snapshot] costs.
func (t *Topics[K, T]) Snapshot() TopicsSnapshot[K] {
	t.mu.Lock()
	bs := maps.Clone(t.topicsLocked())
	t.mu.Unlock()
	s := TopicsSnapshot[K]{Stats: t.Stats(), Topics: make(map[K]Snapshot, len(bs))}
	for k, b := range bs {
		s.Topics[k] = b.Snapshot()
	}
	return s
}
