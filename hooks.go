package fanout

// hookPoint names a decision point of the protocol (DESIGN.md, "Forcing
// interleavings"): under the fanoutcheck build tag a test inside the
// package can pause the goroutine that reaches it and drive another one
// through, so that an interleaving a few instructions wide happens every
// time. Without the tag, hook is empty and costs nothing.
type hookPoint uint8

const (
	// hookReaderMarked: a ring reader has taken values and stored its
	// marks, and is about to look whether publishers wait for its room
	// (tryRecv). It holds w.mu.
	hookReaderMarked hookPoint = iota
	// hookTurnHanded: a publisher queued for the publish turn has been
	// handed it, and is about to lock the broadcaster (yieldTurn).
	hookTurnHanded
	// hookRoomSleep: a publisher waiting for a ring reader's room has
	// registered and unlocked, and is about to sleep (waitFull, waitRoom).
	hookRoomSleep
	// hookRoomWoken: a publisher waiting for room has been woken (or its
	// wait ended), and is about to lock the broadcaster again.
	hookRoomWoken
	// hookReaderYielded: a ring reader of a broadcaster with many readers
	// (fewer for a reader that drops), or of a topic with many in its
	// family's other topics (yieldsBeforePark),
	// found nothing to read, yielded and looked at head parkYields times,
	// and is about to count itself parked (park).
	hookReaderYielded
	// hookReaderParking: a ring reader found nothing to read, counted
	// itself parked, and is about to look at head a last time (park).
	hookReaderParking
	// hookAccepted: a publisher on the slow path has accepted a value
	// and still holds the broadcaster's lock (accept).
	hookAccepted
	// hookEvicted: a publisher has applied its value's verdicts to the
	// full watchers and is about to take those it evicted off its lists
	// (applyAll). It holds the broadcaster's lock.
	hookEvicted
	// hookSiftListed: a publisher has listed the full filtered readers
	// to sift and is about to take their raw values off their queues
	// (sift). It holds the broadcaster's lock, not the readers'.
	hookSiftListed
	// hookSifting: a publisher has taken the raw values of full filtered
	// readers off their queues, unlocked, and is about to ask their
	// filters (sift).
	hookSifting
	// hookPublisherYielding: a publisher whose fast path another
	// publisher closed (it held head's bit or b.mu, the turn, or waited
	// for room), or the room of ring readers it may just have woken
	// (fastClosedByRoom), is about to yield its processor and try again
	// (yieldFast). It holds nothing.
	hookPublisherYielding
	// hookReadLeaving: a Recv of a filtered reader is returning and about
	// to lock w.mu to count itself out of the goroutines reading it
	// (counted, for a read returning values; else leaveRead).
	hookReadLeaving
	// hookRoomCounting: a publisher has counted the WaitIfChannelFull
	// readers full at the sequence it waits for (b.nfull) and is about to
	// count itself a room waiter (waitFull). It holds b.mu.
	hookRoomCounting
	// hookSnapshotLocking: a Snapshot has read the broadcaster's Stats and
	// is about to lock it to list the watchers and the waits. It holds
	// nothing.
	hookSnapshotLocking
	// hookSendsEnded: a publisher that waited for full channel watchers
	// has ended its sends (made, cut short, or left by a watcher that
	// stopped), and is about to lock the broadcaster again (sendBlocked).
	hookSendsEnded
	numHookPoints
)
