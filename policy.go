package fanout

import (
	"fmt"
	"time"
)

// FullChannelBehavior decides what happens when a published value reaches a
// watcher whose queue is full. It generalises the enum of the same name in
// k8s.io/apimachinery/pkg/watch: the built-in strategies are the package-level
// values [WaitIfChannelFull], [DropIfChannelFull], [DropOldestIfChannelFull],
// [EvictIfChannelFull] and the constructor [WaitTimeoutIfChannelFull], and any
// type with an OnFull method can be used instead.
//
// A behaviour is chosen per broadcaster with [WithFullChannelBehavior] passed
// to [New], and can be overridden per watcher by passing the same option to
// [Broadcaster.Watch].
//
// OnFull is called by the publishing goroutine, once for each value that
// meets the watcher's full queue (also when [Broadcaster.ActionOrDrop] then
// refuses the value), while that publisher holds the broadcaster's publish
// turn but none of its locks: other publishers wait, everything else goes
// on. It should be fast and should not block. It may call the broadcaster
// and its watchers (Stats, Watch, Stop, reads, ActionOrDrop, which refuses
// while the turn is held), except the publish methods that wait (Action,
// ActionBatch, ActionContext): they would wait for the very publish that
// called OnFull. That cannot be detected cheaply, since Go does not expose
// which goroutine is calling (reading it costs a stack dump, about a
// microsecond, on every call). A panic in OnFull is recovered: the watcher
// misses that value, counted with reason [DropPanic] and reported to the
// drop handler with the panic as Err, and the broadcaster goes on.
//
// Calls for one broadcaster never run concurrently, so a behaviour used by a
// single broadcaster may keep unsynchronised state; one shared between
// broadcasters must synchronise itself.
type FullChannelBehavior interface {
	OnFull(FullState) Decision
}

// FullState describes the watcher whose queue is full, for
// [FullChannelBehavior.OnFull].
type FullState struct {
	// WatcherID is the watcher's [Watcher.ID].
	WatcherID uint64
	// WatcherName is its [Watcher.Name].
	WatcherName string
	// QueueLength is the watcher's queue capacity.
	QueueLength int
	// Dropped is the number of values this watcher has missed so far, for
	// any reason.
	Dropped uint64
	// ConsecutiveDrops is the number of values this watcher has missed since
	// it last received one. Values its filter leaves out are not received
	// and do not end the run; a filter's panic is a miss in it.
	ConsecutiveDrops uint64
}

// Verdict is the outcome kind of a [Decision].
type Verdict uint8

// The verdicts a [FullChannelBehavior] can return. Any other value is
// taken as VerdictDropFull: the watcher misses the value, counted as
// [DropFull].
const (
	// VerdictWait makes the producer wait until the watcher has room, the
	// watcher is stopped or evicted, the broadcaster shuts down, or the
	// Decision's Timeout (if non-zero) expires, in which case the watcher
	// misses the value. Nothing is dropped while it waits.
	VerdictWait Verdict = iota
	// VerdictDropFull makes the watcher miss the new value: the verdict of
	// [DropIfChannelFull], counted as [DropFull] ("full").
	VerdictDropFull
	// VerdictDropOldest discards the watcher's oldest queued value to make
	// room for the new one.
	VerdictDropOldest
	// VerdictEvict closes the watcher: the values already queued stay
	// readable, the new one is missed, and [Watcher.Err] reports [ErrEvicted].
	VerdictEvict
)

// verdictPanic is the decision of a behaviour whose OnFull panicked.
const verdictPanic Verdict = 255

// String returns the verdict's lower-case name, as used in drop reasons.
func (v Verdict) String() string {
	switch v {
	case VerdictWait:
		return "wait"
	case VerdictDropFull:
		return "drop-full"
	case VerdictDropOldest:
		return "drop-oldest"
	case VerdictEvict:
		return "evict"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Decision is what a [FullChannelBehavior] returns for a full queue.
type Decision struct {
	// Verdict says what to do with the value.
	Verdict Verdict
	// Timeout bounds a VerdictWait: after this long the watcher misses the
	// value and the drop is counted with reason [DropTimeout]. Zero means
	// wait without limit; a negative Timeout means do not wait at all (the
	// value is missed at once, counted as DropTimeout), as for
	// [WaitTimeoutIfChannelFull]. It is ignored for the other verdicts.
	Timeout time.Duration
}

type waitBehavior struct{}

func (waitBehavior) OnFull(FullState) Decision { return Decision{Verdict: VerdictWait} }
func (waitBehavior) String() string            { return "WaitIfChannelFull" }

type dropNewBehavior struct{}

func (dropNewBehavior) OnFull(FullState) Decision { return Decision{Verdict: VerdictDropFull} }
func (dropNewBehavior) String() string            { return "DropIfChannelFull" }

type dropOldestBehavior struct{}

func (dropOldestBehavior) OnFull(FullState) Decision { return Decision{Verdict: VerdictDropOldest} }
func (dropOldestBehavior) String() string            { return "DropOldestIfChannelFull" }

type evictBehavior struct{}

func (evictBehavior) OnFull(FullState) Decision { return Decision{Verdict: VerdictEvict} }
func (evictBehavior) String() string            { return "EvictIfChannelFull" }

type waitTimeoutBehavior struct{ d time.Duration }

func (w waitTimeoutBehavior) OnFull(FullState) Decision {
	return Decision{Verdict: VerdictWait, Timeout: w.d}
}
func (w waitTimeoutBehavior) String() string { return fmt.Sprintf("WaitTimeoutIfChannelFull(%v)", w.d) }

// The built-in full-queue behaviours. They are values, as in k8s, and can be
// compared with ==.
var (
	// WaitIfChannelFull is lossless: the producer waits for the full
	// watcher's room. It is the default.
	WaitIfChannelFull FullChannelBehavior = waitBehavior{}

	// DropIfChannelFull makes a full watcher miss the new value; other
	// watchers are unaffected and the producer never waits for it. Each miss
	// is counted with reason [DropFull].
	DropIfChannelFull FullChannelBehavior = dropNewBehavior{}

	// DropOldestIfChannelFull discards a full watcher's oldest queued value
	// to make room for the new one, so the watcher keeps the most recent
	// values. Each discard is counted with reason [DropOldest]. A hand-off
	// watcher (queue length 0) has nothing queued to discard: a value no
	// consumer is ready for is missed, as with [DropIfChannelFull], and
	// counted with reason [DropFull].
	DropOldestIfChannelFull FullChannelBehavior = dropOldestBehavior{}

	// EvictIfChannelFull closes a watcher the first time a value finds its
	// queue full. The values already queued stay readable; then its channel
	// closes and [Watcher.Err] returns [ErrEvicted].
	//
	// A watcher read only with the pull methods is closed the moment the
	// value finds its queue full: once drained, they return ErrEvicted. One
	// with a channel of its own (once [Watcher.ResultChan] was called, with
	// [WithFilter], or with queue length 0) is read without the
	// broadcaster's locks, and a channel cannot be closed on condition that
	// it is full: its reader may take the last queued values just as the
	// publisher finds the channel full, and then find the channel empty and
	// still open, until the publish that evicts the watcher returns (it
	// closes the channel before it returns). Likewise, the publisher gives
	// a channel watcher its verdict just after the value became readable
	// to pull readers: if its reader made room by then, the watcher takes
	// the value and is not evicted (this holds for every full-queue
	// behaviour: a watcher with room takes the value).
	EvictIfChannelFull FullChannelBehavior = evictBehavior{}
)

// WaitTimeoutIfChannelFull returns a behaviour that waits up to d for a full
// watcher's room and then makes that watcher miss the value (counted with
// reason [DropTimeout]). A d of zero or less never waits: it is
// [DropIfChannelFull].
func WaitTimeoutIfChannelFull(d time.Duration) FullChannelBehavior {
	if d <= 0 {
		return DropIfChannelFull
	}
	return waitTimeoutBehavior{d: d}
}

// DropReason says why a watcher missed a value. A reason is named after
// what happened to the value (Drop<word>, printed as the lower-case word,
// the metric label); a full-queue behaviour after what it does
// (<word>IfChannelFull) and its verdict likewise (Verdict<...>): the word
// is shared, so [DropOldestIfChannelFull] returns [VerdictDropOldest],
// counted as [DropOldest] ("oldest"), and [DropIfChannelFull] returns
// [VerdictDropFull], counted as [DropFull] ("full").
type DropReason uint8

// The reasons a value can be missed. The first five are a watcher's (see
// [Watcher.Stats]); the rest are reported by a [Recorder] and its runners (see
// [RecorderStats]).
const (
	// DropFull: the queue was full and the behaviour chose [VerdictDropFull].
	DropFull DropReason = iota
	// DropOldest: the oldest queued value was discarded for a newer one.
	DropOldest
	// DropTimeout: a bounded wait for room expired.
	DropTimeout
	// DropEvicted: the value met a full queue and the watcher was evicted.
	DropEvicted
	// DropPanic: the watcher's [FullChannelBehavior] or filter
	// ([WithFilter]) panicked deciding about the value, or its filter
	// ended the goroutine that read it (see WithFilter); the watcher
	// missed it.
	DropPanic
	// DropRefused: [Recorder.Record] refused the value because a watcher
	// that waits when full was full; no watcher got it.
	DropRefused
	// DropSpam: the [Correlator]'s spam filter had no token for the value,
	// so the runner did not write it.
	DropSpam
	// DropRejected: the sink failed with an error that the retry policy
	// does not retry (see [RetryPolicy].Retryable), or the sink or handler
	// panicked.
	DropRejected
	// DropRetries: the sink failed [RetryPolicy].MaxTries times.
	DropRetries
	// DropShutdown: the value was still unwritten when [Recorder.Shutdown]'s
	// context ended, or its write failed after Shutdown (no retries then).
	DropShutdown
	numDropReasons

	// numWatcherDropReasons bounds the reasons a watcher itself counts.
	numWatcherDropReasons = DropPanic + 1
)

// String returns the reason's lower-case name.
func (r DropReason) String() string {
	switch r {
	case DropFull:
		return "full"
	case DropOldest:
		return "oldest"
	case DropTimeout:
		return "timeout"
	case DropEvicted:
		return "evicted"
	case DropPanic:
		return "panic"
	case DropRefused:
		return "refused"
	case DropSpam:
		return "spam"
	case DropRejected:
		return "rejected"
	case DropRetries:
		return "retries"
	case DropShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// Drop reports a value that a watcher or a [Recorder] runner missed, to the
// handler set with [WithDropHandler].
type Drop struct {
	// WatcherID identifies the watcher ([Watcher.ID]); for a drop reported
	// by a [Recorder] runner it is the runner's watcher, and 0 for
	// [DropRefused].
	WatcherID uint64
	// WatcherName is the watcher's [Watcher.Name], if it has one; for a
	// Recorder runner, the runner's name ("sink", "handler", "slog").
	WatcherName string
	// Reason says why.
	Reason DropReason
	// Err is the panic, for [DropPanic] (or an error saying that a filter
	// ended its goroutine); the last sink error, for
	// [DropRejected] and [DropRetries] (and for [DropShutdown] when a write
	// failed); nil otherwise.
	Err error
}

// kind classifies a behaviour: the built-in ones are handled without calling
// OnFull, and each takes its own path on the shared ring.
type kind uint8

const (
	kindWait       kind = iota // WaitIfChannelFull: the publisher waits
	kindDropNew                // DropIfChannelFull: drops settled lazily
	kindDropOldest             // DropOldestIfChannelFull: drops settled lazily
	kindEvict                  // EvictIfChannelFull
	kindTimeout                // WaitTimeoutIfChannelFull(d > 0)
	kindCustom                 // a user's behaviour: OnFull per value
)

func kindOf(b FullChannelBehavior) kind {
	switch b.(type) {
	case waitBehavior:
		return kindWait
	case dropNewBehavior:
		return kindDropNew
	case dropOldestBehavior:
		return kindDropOldest
	case evictBehavior:
		return kindEvict
	case waitTimeoutBehavior:
		return kindTimeout
	}
	return kindCustom
}

// mayWait reports whether a behaviour of kind k can return VerdictWait.
func (k kind) mayWait() bool { return k == kindWait || k == kindTimeout || k == kindCustom }

// bounded reports whether a wait for a watcher of this kind may have a
// time limit, measured from when the publish call first waited.
func (k kind) bounded() bool { return k == kindTimeout || k == kindCustom }

// lazy reports whether the drops of a ring reader of kind k are settled by
// whoever next looks at it, not by the publisher.
func (k kind) lazy() bool { return k == kindDropNew || k == kindDropOldest }
