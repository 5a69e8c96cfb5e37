package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
)

// DefaultCheckpointInterval is how often the checkpoint is written at most,
// when the configuration does not say.
const DefaultCheckpointInterval = 2 * time.Second

// Pipeline is the exporter's fan-out: one [fanout.Broadcaster] of
// occurrences, one watcher per sink with the receiver's queue length and
// full-queue strategy, one goroutine per sink writing with the receiver's
// retry policy, and the checkpoint. The source (see [Source]) feeds it with
// [Pipeline.Occurred] and [Pipeline.Deleted], from one goroutine.
type Pipeline struct {
	cfg     *Config
	store   CheckpointStore
	every   time.Duration
	log     *slog.Logger
	b       *fanout.Broadcaster[*Occurrence]
	runners []*runner
	tr      *tracker
	// lookup, if set, looks up involved objects for the rules that need
	// them and for the receivers in withObject (their records carry it).
	lookup     *Lookup
	withObject uint64
	head       atomic.Uint64 // last Seq given out and published (or routed nowhere)
	// published are the Seqs of the last occurrences published, for the
	// bound a lossy sink puts on the checkpoint (runner.doneThrough).
	published recentSeqs
	// firstOnly are the receivers with kubernetes-event-exporter's stream
	// (compat): they take an event's first occurrence only.
	firstOnly uint64

	sinkCtx    context.Context // ends at the shutdown deadline
	sinkCancel context.CancelFunc
	stopCk     chan struct{}
	ckDone     chan struct{}
	shutdown   sync.Once
	shutErr    error

	routedNowhere, droppedByRule atomic.Uint64
	ckWrites, ckFailures         atomic.Uint64
	ckLast                       atomic.Int64  // unix nanos of the last successful write
	abandoned                    atomic.Uint64 // sinks abandoned at shutdown
}

// PipelineOptions configures [NewPipeline].
type PipelineOptions struct {
	// Store keeps the checkpoint; nil keeps none (every restart forwards
	// every live event again).
	Store CheckpointStore
	// Checkpoint is the checkpoint loaded from Store, or nil.
	Checkpoint *Checkpoint
	// Logger logs sink failures and checkpoint errors; nil discards.
	Logger *slog.Logger
	// Lookup, if set, looks up the involved objects of occurrences: for
	// the rules with labels or annotations, and for the receivers whose
	// records carry the object's metadata (format event). Nil looks up
	// nothing (omitLookup: true).
	Lookup *Lookup
}

// NewPipeline builds the sinks of cfg (each receiver's Sink, or one made
// from its configuration), recovers what [Marker] sinks stored after the
// checkpoint, and starts one goroutine per sink and the checkpoint
// goroutine. Stop it with [Pipeline.Shutdown].
func NewPipeline(cfg *Config, opts PipelineOptions) (*Pipeline, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, store: opts.Store, every: time.Duration(cfg.Checkpoint.Interval), log: log,
		b: fanout.New[*Occurrence](), tr: newTracker(opts.Checkpoint), lookup: opts.Lookup,
		stopCk: make(chan struct{}), ckDone: make(chan struct{})}
	for i, rc := range cfg.Receivers {
		if rc.Format != FormatFanout && rc.Log == nil { // the log sink writes no record
			p.withObject |= 1 << i
		}
		if rc.kee {
			p.firstOnly |= 1 << i
		}
	}
	if p.every <= 0 {
		p.every = DefaultCheckpointInterval
	}
	p.sinkCtx, p.sinkCancel = context.WithCancel(context.Background())
	sinks, err := cfg.buildSinks()
	if err != nil {
		p.sinkCancel()
		return nil, err
	}
	for i, rc := range cfg.Receivers {
		r, err := p.newRunner(i, rc, sinks[i], opts.Checkpoint)
		if err != nil {
			p.abort(sinks)
			return nil, err
		}
		p.runners = append(p.runners, r)
		if !r.lossless {
			p.published.grow(r.queueLen + r.held() + 1)
		}
	}
	for i, r := range p.runners {
		if err := r.start(p.sinkCtx); err != nil {
			p.abort(sinks)
			for _, started := range p.runners[:i] {
				<-started.done()
			}
			return nil, err
		}
	}
	go p.checkpointLoop()
	return p, nil
}

func (p *Pipeline) newRunner(i int, rc *Receiver, s Sink, ck *Checkpoint) (*runner, error) {
	w, err := p.b.Watch(fanout.WithName(rc.Name), fanout.WithQueueLength(rc.Queue.Length),
		fanout.WithFullChannelBehavior(rc.Queue.behavior()))
	if err != nil {
		return nil, err
	}
	r := &runner{name: rc.Name, bit: 1 << i, sink: s, w: w, retry: rc.Retry, batch: rc.Batch, writers: max(rc.Writers, 1),
		queueLen: rc.Queue.Length, lossless: rc.Queue.Strategy == StrategyWait, log: p.log}
	if m, ok := s.(Marker); ok && ck != nil && ck.Marks[rc.Name] != "" {
		r.skip, err = m.Stored(ck.Marks[rc.Name])
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("receiver %q: recovering what it stored after the checkpoint: %w", rc.Name, err)
		}
	}
	return r, nil
}

// abort closes the sinks after a failed start.
func (p *Pipeline) abort(sinks []Sink) {
	p.b.Shutdown()
	p.sinkCancel()
	for _, s := range sinks {
		_ = s.Close(context.Background())
	}
}

// Occurred routes o, records it as forwarded and publishes it to the sinks
// it is routed to. It returns when every sink's queue has taken it or
// dropped it as the sink's strategy says (a Wait sink with a full queue
// makes it wait), or with ctx's error, or [fanout.ErrStopped] after
// Shutdown. With a [Lookup], it first looks the involved object up if a
// rule with labels or annotations is evaluated, or a receiver whose
// records carry the object is selected (each lookup bounded by the
// lookup's timeout; a failure lets the occurrence through without the
// metadata). It must be called from one goroutine at a time, with
// [Pipeline.Deleted].
func (p *Pipeline) Occurred(ctx context.Context, o *Occurrence) error {
	var dropped, raiseOnly bool
	if p.lookup != nil {
		o.resolve = func() *ObjectMeta { return p.lookup.Get(ctx, o.coreEvent().InvolvedObject) }
	}
	o.receivers, dropped = p.cfg.Route.receivers(o)
	if o.raise && o.receivers&p.firstOnly != 0 {
		o.receivers &^= p.firstOnly // a count raise, which they ignore
		raiseOnly = o.receivers == 0
	}
	if o.receivers&p.withObject != 0 {
		o.involvedObject() // before publishing: the records carry it
	}
	o.resolve = nil
	rv := o.ResourceVersion
	if o.listed {
		rv = "" // a list's items come in no resource version order
	}
	o.Seq = p.tr.add(change{uid: o.UID, count: o.Count, rv: rv})
	p.commitEvery(o.Seq)
	if o.receivers == 0 {
		switch {
		case raiseOnly: // routed, to receivers that take first occurrences only
		case dropped:
			p.droppedByRule.Add(1)
		default:
			p.routedNowhere.Add(1)
		}
		p.head.Store(o.Seq)
		return nil
	}
	if err := p.b.ActionContext(ctx, o); err != nil {
		return err
	}
	p.published.add(o.Seq)
	p.head.Store(o.Seq)
	return nil
}

// skipped records that the source did not forward the event uid at count
// (older than the age cut-off at start), so that the checkpoint counts it
// as handled.
func (p *Pipeline) skipped(uid string, count int32) {
	seq := p.tr.add(change{uid: uid, count: count})
	p.head.Store(seq)
	p.commitEvery(seq)
}

// Deleted records that the event uid was deleted, so that it leaves the
// checkpoint.
func (p *Pipeline) Deleted(uid, resourceVersion string) {
	seq := p.tr.add(change{uid: uid, rv: resourceVersion, deleted: true})
	p.head.Store(seq)
	p.commitEvery(seq)
}

// Progress records that every change up to resourceVersion has been
// handed over, so that the checkpoint resumes the watch from there once
// every sink has finished with what came before.
func (p *Pipeline) Progress(resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	seq := p.tr.add(change{rv: resourceVersion})
	p.head.Store(seq)
	p.commitEvery(seq)
}

// commitBatch is how many changes the source adds between two commits of
// its own: the pending changes are bounded by it plus what the sinks hold,
// whatever the checkpoint interval (at 200,000 changes/s and a 2 s
// interval, committing only when checkpointing kept 400,000 changes, 80
// MB).
const commitBatch = 4096

// commitEvery commits what every sink has finished with, once every
// commitBatch changes.
func (p *Pipeline) commitEvery(seq uint64) {
	if seq%commitBatch == 0 {
		p.tr.commit(p.watermark())
	}
}

// watermark returns the last Seq every sink has finished with.
func (p *Pipeline) watermark() uint64 {
	h := p.head.Load()
	w := h
	for _, r := range p.runners {
		w = min(w, r.doneThrough(h, &p.published))
	}
	return w
}

// checkpointLoop writes the checkpoint at most once per interval, when it
// changed, until Shutdown.
func (p *Pipeline) checkpointLoop() {
	defer close(p.ckDone)
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-p.stopCk:
			return
		case <-t.C:
			_ = p.saveCheckpoint(context.Background()) // logged, counted, retried
		}
	}
}

// saveCheckpoint commits what every sink has finished with and saves it if
// it changed or the last save failed; it returns the save's error, logged
// and counted.
func (p *Pipeline) saveCheckpoint(ctx context.Context) error {
	p.tr.commit(p.watermark())
	if !p.tr.takeChanged() {
		return nil
	}
	marks := map[string]string{}
	through := p.tr.committedThrough()
	for _, r := range p.runners {
		if m, ok := r.sink.(Marker); ok {
			marks[r.name] = m.Mark(through) // also lets the sink forget older marks
		}
	}
	if p.store == nil {
		p.tr.savedThrough(through) // the committed state is the checkpoint
		return nil
	}
	ck := p.tr.snapshot()
	ck.Written = time.Now().UTC()
	if len(marks) > 0 {
		ck.Marks = marks
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.store.Save(ctx, ck); err != nil {
		p.ckFailures.Add(1)
		p.tr.saveFailed() // written at the next tick, even if nothing changes by then
		p.log.Error("checkpoint not written", "err", err)
		return err
	}
	p.tr.savedThrough(ck.Seq)
	p.ckWrites.Add(1)
	p.ckLast.Store(ck.Written.UnixNano())
	return nil
}

// shutdownGrace is how long Shutdown waits, after its deadline has
// cancelled the writes in progress, for a sink's write to return before
// it abandons the sink.
const shutdownGrace = time.Second

// Shutdown stops intake, lets every sink write what it has queued until
// ctx ends (then cancels the writes in progress and counts what is left as
// dropped at shutdown), writes the last checkpoint and closes the sinks. A
// sink whose write still does not return [shutdownGrace] after ctx ended
// (blocked in a write no context cancels, on a stalled pipe) is
// abandoned: its goroutine is left blocked, the checkpoint covers only
// what it had finished with, and it is not closed. It returns an error if
// a lossless (Wait) sink could not finish or was abandoned, the last
// checkpoint could not be written, or a sink failed to close; occurrences a lossy sink had not written are counted
// and logged, not an error. It is idempotent; later calls return the first
// call's result.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	p.shutdown.Do(func() { p.shutErr = p.doShutdown(ctx) })
	return p.shutErr
}

func (p *Pipeline) doShutdown(ctx context.Context) error {
	p.b.Shutdown()
	late := p.waitRunners(ctx)
	p.sinkCancel()
	var err error
	if late {
		err = p.unwritten(ctx.Err())
	}
	close(p.stopCk)
	<-p.ckDone
	if cerr := p.saveCheckpoint(context.WithoutCancel(ctx)); cerr != nil {
		err = errors.Join(err, fmt.Errorf("the last checkpoint was not written: %w", cerr))
	}
	for _, r := range p.runners {
		if r.abandoned.Load() {
			continue // its write may hold what Close needs
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if cerr := r.sink.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("receiver %q: close: %w", r.name, cerr))
		}
		cancel()
	}
	return err
}

// waitRunners waits for every runner to exit. Once ctx ends, it cancels
// the writes in progress and waits shutdownGrace more, then abandons the
// runners still writing. It reports whether ctx ended first.
func (p *Pipeline) waitRunners(ctx context.Context) (late bool) {
	var grace <-chan struct{}
	for _, r := range p.runners {
		select {
		case <-r.done():
			continue
		case <-ctx.Done():
		}
		if grace == nil {
			late = true
			p.sinkCancel()
			gctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			grace = gctx.Done()
		}
		select {
		case <-r.done():
		case <-grace:
			p.abandon(r)
		}
	}
	return late
}

// abandon gives up on r, whose write did not return after the shutdown
// deadline and grace: the checkpoint no longer counts anything it had not
// finished with as done.
func (p *Pipeline) abandon(r *runner) {
	r.abandoned.Store(true)
	p.abandoned.Add(1)
	p.log.Error("sink abandoned at shutdown: its write did not return after the deadline", "sink", r.name,
		"grace", shutdownGrace, "occurrences", r.pending())
}

// unwritten reports the occurrences the sinks had not written when the
// shutdown deadline passed (cause): an error if a lossless (Wait) sink had
// any, or was abandoned, which the checkpoint does not cover, so a restart
// writes them; a warning for a lossy sink, whose drops are counted by
// design.
func (p *Pipeline) unwritten(cause error) error {
	var err error
	for _, r := range p.runners {
		n := r.run.Stats().DroppedBy(DropShutdown)
		if r.abandoned.Load() {
			n += r.pending()
		}
		switch {
		case n == 0:
		case r.lossless:
			err = errors.Join(err, fmt.Errorf("receiver %q: %d occurrences unwritten at the shutdown deadline%s: %w",
				r.name, n, r.abandonedNote(), cause))
		default:
			p.log.Warn("lossy sink dropped occurrences at the shutdown deadline", "sink", r.name, "occurrences", n,
				"reason", DropLabel(DropShutdown), "abandoned", r.abandoned.Load())
		}
	}
	return err
}

// Stats returns every sink's counters, in the configuration's order.
func (p *Pipeline) Stats() []SinkStats {
	out := make([]SinkStats, len(p.runners))
	for i, r := range p.runners {
		out[i] = r.stats()
	}
	return out
}

// PipelineStats is a snapshot of the pipeline's own counters.
type PipelineStats struct {
	// Changes counts the occurrences and deletions given Seqs;
	// DroppedByRule the occurrences a drop rule removed; RoutedNowhere
	// those no match rule sent anywhere.
	Changes, DroppedByRule, RoutedNowhere uint64
	// CheckpointWrites and CheckpointFailures count checkpoint saves;
	// CheckpointLag is the number of changes no written checkpoint
	// covers yet: those a sink has not finished with, and those finished
	// since the last checkpoint written (all of them while every write
	// fails). A restart would forward them again.
	CheckpointWrites, CheckpointFailures uint64
	CheckpointLag                        int
	// LastCheckpoint is when the last checkpoint was written (zero if
	// never).
	LastCheckpoint time.Time
	// SinksAbandoned counts the sinks Shutdown abandoned: their write
	// did not return after the deadline (see [Pipeline.Shutdown]).
	SinksAbandoned uint64
}

// PipelineStats returns the pipeline's own counters.
func (p *Pipeline) PipelineStats() PipelineStats {
	s := PipelineStats{Changes: p.head.Load(), DroppedByRule: p.droppedByRule.Load(),
		RoutedNowhere: p.routedNowhere.Load(), CheckpointWrites: p.ckWrites.Load(),
		CheckpointFailures: p.ckFailures.Load(), CheckpointLag: p.tr.lag(), SinksAbandoned: p.abandoned.Load()}
	if n := p.ckLast.Load(); n != 0 {
		s.LastCheckpoint = time.Unix(0, n)
	}
	return s
}
