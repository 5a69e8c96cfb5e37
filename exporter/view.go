package exporter

import (
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/debug"
)

// DebugViewPath is where [Run] serves the exporter's live view
// (github.com/fanout-go/fanout/debug) on its Listener, beside /metrics:
// the exporter's state (leader, lease holder, readiness, the source's
// counters, the checkpoint's pending changes and last write) and its
// pipeline (one watcher per sink, named after its receiver, with its
// queue, what it wrote, dropped and retried, writes in flight, and
// whether the source waits for it now). Like /metrics it shows names and
// counts, never an event's content. ?format=json gives the same as JSON.
const DebugViewPath = "/debug/fanout"

// newView returns the exporter's live view.
func (e *exporter) newView() (*debug.Handler, error) {
	h, err := debug.New()
	if err != nil {
		return nil, err
	}
	h.Register(debug.Fields("fanout-eventer", e.viewFields))
	h.Register(debug.SourceFunc(e.viewSinks))
	return h, nil
}

// viewFields returns the exporter's state for the view.
func (e *exporter) viewFields() []debug.Field {
	ready, why := e.ready(time.Now())
	fs := []debug.Field{{Name: "version", Value: BuildVersion()}, {Name: "leader", Value: e.metrics.leader.Load()},
		{Name: "ready", Value: ready}}
	if !ready {
		fs = append(fs, debug.Field{Name: "not ready", Value: why})
	}
	if l := e.lock.Load(); l != nil {
		fs = append(fs, debug.Field{Name: "lease holder", Value: l.holderSeen()})
	}
	if s := e.metrics.source.Load(); s != nil {
		st := s.Stats()
		fs = append(fs, debug.Field{Name: "source synced", Value: st.Synced},
			debug.Field{Name: "source occurrences", Value: st.Occurrences},
			debug.Field{Name: "source lists", Value: st.Lists}, debug.Field{Name: "source watches", Value: st.Watches},
			debug.Field{Name: "source failures", Value: st.Failures},
			debug.Field{Name: "source lag seconds", Value: st.Lag.Seconds()})
	}
	if p := e.metrics.pipeline.Load(); p != nil {
		ps := p.PipelineStats()
		if p.store != nil { // without a checkpoint, nothing is written (as in the metrics)
			fs = append(fs, debug.Field{Name: "checkpoint pending", Value: ps.CheckpointLag},
				debug.Field{Name: "checkpoint last write", Value: ps.LastCheckpoint},
				debug.Field{Name: "checkpoint writes", Value: ps.CheckpointWrites},
				debug.Field{Name: "checkpoint failures", Value: ps.CheckpointFailures})
		}
		fs = append(fs, debug.Field{Name: "dropped by rule", Value: ps.DroppedByRule},
			debug.Field{Name: "routed nowhere", Value: ps.RoutedNowhere})
	}
	return fs
}

// viewSinks returns the pipeline's section of the view: its broadcaster,
// each sink's watcher with its runner beside it.
func (e *exporter) viewSinks() debug.Section {
	sec := debug.Section{Name: "sinks", Kind: "pipeline"}
	p := e.metrics.pipeline.Load()
	if p == nil {
		sec.Fields = []debug.Field{{Name: "pipeline", Value: "not running: this replica does not lead"}}
		return sec
	}
	runs := make([]*fanout.Runner[*Occurrence], len(p.runners))
	for i, r := range p.runners {
		runs[i] = r.run
	}
	sec.Broadcasters = []debug.BroadcasterSnapshot{debug.BroadcasterOf("occurrences", p.b, runs...)}
	return sec
}

// blocking returns the names of the sinks the source waits for now (a
// full queue of the Wait strategy, or a timed wait), and how long it has
// waited so far (a lower bound: see [fanout.Wait]).
func (p *Pipeline) blocking() (map[string]bool, time.Duration) {
	snap := p.b.Snapshot()
	if len(snap.Waiting) == 0 {
		return nil, 0
	}
	ids := map[uint64]bool{}
	var longest time.Duration
	for _, w := range snap.Waiting {
		ids[w.WatcherID] = true
		longest = max(longest, w.Waited)
	}
	out := map[string]bool{}
	for _, r := range p.runners {
		if ids[r.w.ID()] {
			out[r.name] = true
		}
	}
	return out, longest
}
