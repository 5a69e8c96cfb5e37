package fanoutnats

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
	"github.com/nats-io/nats.go"
)

// The acknowledgement of a durable [Consumer] (see "Acknowledgement" in the
// package documentation). A durable consumer acknowledges with AckAll: one
// acknowledgement of stream sequence s acknowledges every message up to s.
// The acker sends one, now and then, for the newest message whose values
// every lossless watcher of the local broadcaster has taken
// ([fanout.Broadcaster.Taken]).
//
// The protocol between the consumer's goroutine (the deliverer) and the
// acker's goroutine:
//
//   - State, guarded by acker.mu: pending, the messages delivered into the
//     broadcaster and not yet acknowledged, in stream order, each with the
//     Taken that covers its values (need), its reply subject and its
//     delivery sequence; reack, the newest redelivery of a message already
//     acknowledged; sent, the last acknowledgement sent; floor, the highest
//     stream sequence acknowledged; confirm, set by a reconnect.
//   - Owners: the deliverer appends to pending, records redeliveries and
//     resets the server's consumer (repairGap); the acker alone sends
//     acknowledgements. Both hold sendMu around what they send, so that no
//     acknowledgement crosses a reset. Lock order: sendMu, then mu; mu is
//     never held across a call to NATS.
//   - Invariant: sent.dseq is at least the server's delivery ack floor,
//     which only these acknowledgements move and a reset sets to 0. The
//     server ignores an AckAll whose delivery sequence is not above that
//     floor (and still confirms it), so a reply is used only if its dseq is
//     above sent.dseq: after a redelivery, the older replies wait for their
//     own redelivery; after a reset, every reply known is dropped.
//   - Who wakes whom: the deliverer kicks the acker when pending becomes
//     non-empty and every ackKick messages; nothing tells the acker when a
//     watcher reads, so it polls Taken while values are pending, every
//     pollMin, backing off to pollMax while Taken does not move; a
//     reconnect (a status listener on the connection) makes it confirm the
//     floor and tell the deliverer (onReconnect), which resets the durable
//     to redeliver what the connection lost; the deliverer's end (ended)
//     makes it finish: wait until every value delivered is taken (or Close
//     gives up), acknowledge, confirm. A confirmation holds sendMu for each
//     attempt only, so that a reset can run between attempts.
type acker struct {
	nc    *nats.Conn
	taken func() uint64
	// ackFloor asks the server for the durable's ack floor (stream
	// sequence).
	ackFloor func(context.Context) (uint64, error)
	rep      *reporter
	ctx      context.Context // done when Close gives up
	// onReconnect, if set, is called on the acker's goroutine after each
	// reconnect.
	onReconnect func()

	sendMu sync.Mutex
	mu     sync.Mutex
	// pending[head:] are the messages delivered and not acknowledged.
	pending  []ackEntry
	head     int
	lastNeed uint64
	reack    ackEntry
	sent     ackEntry
	floor    uint64
	confirm  bool // a reconnect happened: confirm the floor

	kick  chan struct{}
	ended chan struct{} // closed by the deliverer: nothing more is delivered
	done  chan struct{}
	err   error // why the last acknowledgement is not confirmed (read after done)

	// Owned by the acker's goroutine.
	confirmed   uint64    // the floor the server confirmed
	retryAt     time.Time // no confirmation attempt before it
	sentAcks    atomic.Uint64
	confirmedN  atomic.Uint64
	unconfirmed atomic.Uint64
	reconnects  atomic.Uint64
	floorNow    atomic.Uint64
}

// ackEntry is one message to acknowledge.
type ackEntry struct {
	seq   uint64 // stream sequence
	dseq  uint64 // delivery sequence of reply; 0: no usable reply
	need  uint64 // the Taken at which the lossless watchers took its values
	reply string // the message's ack subject
}

const (
	// ackKick is how many messages the deliverer appends between kicks.
	ackKick = 64
	// pollMin and pollMax bound the acker's polling of Taken.
	pollMin = time.Millisecond
	pollMax = 32 * time.Millisecond
)

// ackBody is the payload of an acknowledgement.
var ackBody = []byte("+ACK")

func newAcker(nc *nats.Conn, taken func() uint64, ackFloor func(context.Context) (uint64, error), rep *reporter, ctx context.Context) *acker {
	return &acker{nc: nc, taken: taken, ackFloor: ackFloor, rep: rep, ctx: ctx,
		kick: make(chan struct{}, 1), ended: make(chan struct{}), done: make(chan struct{})}
}

// start starts the acker's goroutine.
func (a *acker) start() {
	status := a.nc.StatusChanged(nats.CONNECTED)
	go a.run(status)
}

// add records a message whose values the broadcaster accepted, need being
// the Taken that covers them; 0 means a message without values, covered
// with the one before it.
func (a *acker) add(seq, dseq uint64, reply string, need uint64) {
	a.mu.Lock()
	if need == 0 {
		need = a.lastNeed
	}
	a.lastNeed = need
	a.pending = append(a.pending, ackEntry{seq: seq, dseq: dseq, need: need, reply: reply})
	n := len(a.pending) - a.head
	a.mu.Unlock()
	if n == 1 || n%ackKick == 0 {
		a.wake()
	}
}

func (a *acker) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// redelivered records a new delivery of a message delivered before: its
// reply replaces the older one. A redelivery of a message already
// acknowledged means that the server's floor is behind: it is acknowledged
// again.
func (a *acker) redelivered(seq, dseq uint64, reply string) {
	a.mu.Lock()
	if seq <= a.floor {
		a.reack = ackEntry{seq: seq, dseq: dseq, reply: reply}
		a.mu.Unlock()
		a.wake()
		return
	}
	live := a.pending[a.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].seq >= seq })
	if i < len(live) && live[i].seq == seq {
		live[i].dseq, live[i].reply = dseq, reply
	}
	a.mu.Unlock()
}

// invalidate forgets every reply known: the deliverer is about to reset
// the server's consumer, which numbers deliveries from 1 again. The caller
// holds sendMu until the reset is done.
func (a *acker) invalidate() {
	a.mu.Lock()
	defer a.mu.Unlock()
	live := a.pending[a.head:]
	for i := range live {
		live[i].dseq, live[i].reply = 0, ""
	}
	a.reack = ackEntry{}
	a.sent.dseq, a.sent.reply = 0, ""
}

// end tells the acker that nothing more is delivered, and waits until it
// has finished (see finish).
func (a *acker) end() {
	close(a.ended)
	<-a.done
}

func (a *acker) run(status chan nats.Status) {
	defer close(a.done)
	defer a.nc.RemoveStatusListener(status)
	var p poller
	defer p.stop()
	for {
		fresh := false
		select {
		case <-a.kick:
			fresh = true
		case <-p.c():
		case _, ok := <-status:
			if !ok {
				status = nil
				continue
			}
			a.reconnects.Add(1)
			a.mu.Lock()
			a.confirm = true
			a.mu.Unlock()
			if a.onReconnect != nil {
				a.onReconnect()
			}
			fresh = true
		case <-a.ended:
			a.finish(&p)
			return
		}
		moved := a.pass()
		p.arm(a.busy(), fresh || moved)
	}
}

// busy reports whether values wait for an acknowledgement or the floor
// for a confirmation.
func (a *acker) busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.head < len(a.pending) || a.reack.dseq > 0 || a.confirm
}

// pass acknowledges what the watchers took, and confirms the floor if a
// reconnect asked for it. It reports whether it acknowledged anything.
func (a *acker) pass() bool {
	taken := a.taken()
	a.sendMu.Lock()
	a.mu.Lock()
	e, ok := a.choose(taken)
	confirm := a.confirm && !time.Now().Before(a.retryAt)
	a.mu.Unlock()
	if ok {
		a.publish(e)
	}
	a.sendMu.Unlock()
	if confirm && a.confirmFloor() == nil {
		a.mu.Lock()
		a.confirm = false
		a.mu.Unlock()
	}
	return ok
}

// choose returns the acknowledgement to send, if any, and records it as
// sent: the newest message taken whose reply the server will not ignore,
// or else a redelivery of an acknowledged one. Caller holds sendMu and mu.
func (a *acker) choose(taken uint64) (ackEntry, bool) {
	live := a.pending[a.head:]
	k := sort.Search(len(live), func(i int) bool { return live[i].need > taken })
	for i := k - 1; i >= 0; i-- {
		if live[i].dseq <= a.sent.dseq {
			continue
		}
		e := live[i]
		clear(live[:i+1])
		a.head += i + 1
		if a.head > len(a.pending)/2 {
			a.pending = append(a.pending[:0], a.pending[a.head:]...)
			a.head = 0
		}
		a.sent, a.floor = e, max(a.floor, e.seq)
		if a.reack.seq <= e.seq {
			a.reack = ackEntry{}
		}
		return e, true
	}
	if e := a.reack; e.dseq > a.sent.dseq {
		a.sent, a.reack = e, ackEntry{}
		return e, true
	}
	return ackEntry{}, false
}

// publish sends an acknowledgement without waiting for the server. Caller
// holds sendMu.
func (a *acker) publish(e ackEntry) {
	if err := a.nc.Publish(e.reply, ackBody); err != nil {
		a.rep.report(&Error{Op: "ack", Sequence: e.seq, Err: err})
		return
	}
	a.sentAcks.Add(1)
	a.floorNow.Store(a.floorSeq())
}

func (a *acker) floorSeq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.floor
}

// confirmFloor makes sure the server holds the floor: it sends the last
// acknowledgement again and waits for the server's reply (a double ack),
// then asks the server for the durable's ack floor. A failure is counted
// and reported, and the next attempt waits DefaultRetryWait.
func (a *acker) confirmFloor() error {
	floor := a.floorSeq()
	if floor <= a.confirmed {
		return nil
	}
	err := a.ctx.Err()
	if err == nil {
		err = a.confirmOnce(floor)
	}
	if err != nil {
		a.retryAt = time.Now().Add(DefaultRetryWait)
		return a.lost(floor, err)
	}
	a.confirmed = floor
	a.confirmedN.Add(1)
	return nil
}

// confirmOnce sends the last acknowledgement again as a double ack and
// reads the server's ack floor back, until the floor has reached floor, for
// DefaultTimeout at most. A cluster's new consumer leader may answer with
// an older floor for a moment after it confirmed an acknowledgement, and a
// restarted server needs a moment to answer at all: hence the retries.
// Each attempt holds sendMu, the waits between them do not, so that the
// consumer can reset the durable meanwhile.
func (a *acker) confirmOnce(floor uint64) error {
	ctx, cancel := context.WithTimeout(a.ctx, DefaultTimeout)
	defer cancel()
	for tries := 1; ; tries++ {
		err := a.askFloorNow(ctx, floor)
		if err == nil {
			return nil
		}
		if !guard.Sleep(ctx, confirmBackoff.Pause(tries)) {
			return err
		}
	}
}

// confirmBackoff paces confirmOnce's attempts: 1 ms, doubling up to
// 100 ms, until its context ends.
var confirmBackoff = fanout.RetryPolicy{MaxTries: math.MaxInt, Sleep: time.Millisecond, MaxSleep: 100 * time.Millisecond}

// askFloorNow is askFloor with the last acknowledgement sent, holding
// sendMu.
func (a *acker) askFloorNow(ctx context.Context, floor uint64) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	a.mu.Lock()
	sent := a.sent
	a.mu.Unlock()
	return a.askFloor(ctx, sent, floor)
}

// askFloor sends sent as a double ack, if it is usable, and returns an
// error unless the server's ack floor has then reached floor.
func (a *acker) askFloor(ctx context.Context, sent ackEntry, floor uint64) error {
	if sent.dseq > 0 {
		if _, err := a.nc.RequestWithContext(ctx, sent.reply, ackBody); err != nil {
			return err
		}
		a.sentAcks.Add(1)
	}
	got, err := a.ackFloor(ctx)
	if err != nil {
		return err
	}
	if got < floor {
		return fmt.Errorf("the server's ack floor is stream sequence %d, below %d", got, floor)
	}
	return nil
}

// finish waits until every value delivered is taken, or Close gives up, or
// the connection is closed; acknowledges what was taken and confirms the
// floor. The error of the confirmation, if any, is kept for Close.
func (a *acker) finish(p *poller) {
	for a.waiting() {
		p.arm(true, false)
		select {
		case <-p.c():
		case <-a.kick:
		case <-a.ctx.Done():
		}
		a.pass()
	}
	a.pass()
	if n, last := a.stranded(); n > 0 {
		// Taken, but every reply known for them is one the server would
		// ignore: their redeliveries did not come before the end.
		a.err = a.lost(last, fmt.Errorf("%d messages taken, up to stream sequence %d, had no usable reply", n, last))
	}
	if a.floorSeq() <= a.confirmed {
		return
	}
	if a.nc.IsClosed() {
		a.err = a.lost(a.floorSeq(), nats.ErrConnectionClosed)
		return
	}
	if err := a.confirmFloor(); err != nil {
		a.err = err
	}
}

// stranded returns how many messages pending were taken, and the last of
// them.
func (a *acker) stranded() (int, uint64) {
	taken := a.taken()
	a.mu.Lock()
	defer a.mu.Unlock()
	live := a.pending[a.head:]
	k := sort.Search(len(live), func(i int) bool { return live[i].need > taken })
	if k == 0 {
		return 0, 0
	}
	return k, live[k-1].seq
}

// lost counts and reports an acknowledgement that cannot be confirmed.
func (a *acker) lost(seq uint64, cause error) error {
	a.unconfirmed.Add(1)
	err := &Error{Op: "ack", Sequence: seq, Err: fmt.Errorf("%w: %w", ErrAckUnconfirmed, cause)}
	a.rep.report(err)
	return err
}

// waiting reports whether finish should wait for the watchers: values
// delivered are not taken yet, and they can still be acknowledged.
func (a *acker) waiting() bool {
	if a.ctx.Err() != nil || a.nc.IsClosed() {
		return false
	}
	taken := a.taken()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.head < len(a.pending) && a.pending[len(a.pending)-1].need > taken
}

// poller is the acker's timer: armed while something waits, every pollMin
// after progress, twice as long after each pass without, up to pollMax.
type poller struct {
	t     *time.Timer
	every time.Duration
	on    bool
}

func (p *poller) c() <-chan time.Time {
	if !p.on {
		return nil
	}
	return p.t.C
}

func (p *poller) arm(busy, fresh bool) {
	if !busy {
		p.stop()
		return
	}
	if fresh || p.every == 0 {
		p.every = pollMin
	} else {
		p.every = min(2*p.every, pollMax)
	}
	if p.t == nil {
		p.t = time.NewTimer(p.every)
	} else {
		p.t.Reset(p.every)
	}
	p.on = true
}

func (p *poller) stop() {
	if p.t != nil {
		p.t.Stop()
	}
	p.on = false
}
