package debug

import "time"

// This file computes the rates the view shows, from the counters of the
// snapshots that page loads take: nothing samples between page loads.
// Each counter series keeps the samples taken at least `every` apart, over
// the rate window (and, for a broadcaster, over its sparklines' history);
// a rate is the difference between the value now and the oldest sample in
// the window, over the time between them. A series whose counters go down
// (a broadcaster replaced under the same name, its counters at zero again)
// starts afresh; one that a page load no longer sees is forgotten. A page
// load that read a source before another load, which has already kept its
// samples, read it again (two loads at once) is stale for that source: it
// shows rates, but keeps, resets and forgets nothing of its series.

// nvals is the number of counters a series samples together.
const nvals = 3

// sample is the counters of a series at one moment.
type sample struct {
	at time.Time
	v  [nvals]uint64
}

// series is one row's samples, oldest first.
type series struct {
	samples []sample
	seen    uint64 // the page load that last saw it
}

// seriesKey names a series: a broadcaster (row false) or one of its
// watchers, of a registered source; key (the BroadcasterSnapshot's), else
// dup (their order), tells apart the broadcasters of one section that
// have the same name.
type seriesKey struct {
	src         *registered
	broadcaster string
	key         any
	dup         int
	row         bool
	watcher     uint64
}

// rates holds every series; its owner serializes access.
type rates struct {
	every, window time.Duration
	keep          int // samples a broadcaster's series keeps: its history
	series        map[seriesKey]*series
	load          uint64
	stale         map[*registered]bool // the page load's stale sources
}

func newRates(every, window time.Duration, history int) *rates {
	return &rates{every: every, window: window, keep: history + 1, series: map[seriesKey]*series{}}
}

// begin starts a page load's observations; those of a stale source are
// not kept.
func (r *rates) begin(stale map[*registered]bool) { r.load, r.stale = r.load+1, stale }

// end forgets the series the page load did not see, but those of its stale
// sources.
func (r *rates) end() {
	for k, s := range r.series {
		if s.seen != r.load && !r.stale[k.src] {
			delete(r.series, k)
		}
	}
	r.stale = nil
}

// observe records the counters v of series k at now, and returns their
// rates per second over the window (ok false until a sample is old enough
// to compare with) and the series (nil for a new series of a stale
// source). A stale source's counters are compared, not recorded.
func (r *rates) observe(k seriesKey, now time.Time, v [nvals]uint64) (perSec [nvals]float64, ok bool, s *series) {
	s = r.series[k]
	if r.stale[k.src] {
		if s == nil {
			return perSec, false, nil
		}
		s.seen = r.load
		perSec, ok = r.rate(s, now, v)
		return perSec, ok, s
	}
	if s == nil {
		s = &series{}
		r.series[k] = s
	}
	s.seen = r.load
	r.record(s, k.row, now, v)
	perSec, ok = r.rate(s, now, v)
	return perSec, ok, s
}

// record adds the counters v at now to s, unless its last sample is less
// than every old; counters that went down start s afresh.
func (r *rates) record(s *series, row bool, now time.Time, v [nvals]uint64) {
	if n := len(s.samples); n > 0 && decreased(s.samples[n-1].v, v) {
		s.samples = s.samples[:0]
	}
	if n := len(s.samples); n == 0 || now.Sub(s.samples[n-1].at) >= r.every {
		s.samples = append(s.samples, sample{at: now, v: v})
	}
	keep := int(r.window/r.every) + 1
	if !row {
		keep = max(keep, r.keep)
	}
	if extra := len(s.samples) - keep; extra > 0 {
		s.samples = append(s.samples[:0], s.samples[extra:]...)
	}
}

// rate returns the rates per second of the counters v at now since the
// oldest sample of s in the window; ok is false without one before now, or
// if v is lower (a stale read older than it).
func (r *rates) rate(s *series, now time.Time, v [nvals]uint64) (perSec [nvals]float64, ok bool) {
	for _, b := range s.samples {
		if now.Sub(b.at) > r.window+r.every/2 {
			continue
		}
		dt := now.Sub(b.at).Seconds()
		if dt <= 0 || decreased(b.v, v) {
			return perSec, false
		}
		for i := range v {
			perSec[i] = float64(v[i]-b.v[i]) / dt
		}
		return perSec, true
	}
	return perSec, false
}

// decreased reports whether a counter went down from a to b.
func decreased(a, b [nvals]uint64) bool {
	for i := range a {
		if b[i] < a[i] {
			return true
		}
	}
	return false
}

// history returns the rate per second of counter i between each two
// consecutive samples of s, oldest first: a sparkline's points (none for a
// nil s).
func (s *series) history(i int) []float64 {
	out := []float64{} // [] in the JSON, not null
	if s == nil {
		return out
	}
	for j := 1; j < len(s.samples); j++ {
		a, b := s.samples[j-1], s.samples[j]
		if dt := b.at.Sub(a.at).Seconds(); dt > 0 {
			out = append(out, float64(b.v[i]-a.v[i])/dt)
		}
	}
	return out
}
