package debug

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/internal/guard"
)

// Page is the view at one moment: what ?format=json returns, and what the
// HTML page shows. Rates are per second over the last RateWindowSeconds,
// from the counters of the page loads in that window (see the package
// documentation); a rate is absent (null) until a page load has a sample
// to compare with.
type Page struct {
	Time              time.Time     `json:"time"`
	RateWindowSeconds float64       `json:"rateWindowSeconds"`
	RefreshSeconds    float64       `json:"refreshSeconds"`
	Sections          []SectionView `json:"sections"`
}

// SectionView is a [Section] as the view shows it.
type SectionView struct {
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	Fields       []Field           `json:"fields,omitempty"`
	Broadcasters []BroadcasterView `json:"broadcasters,omitempty"`
	// Omitted counts the broadcasters left out by the page's limit.
	Omitted int `json:"omittedBroadcasters,omitempty"`
}

// BroadcasterView is one broadcaster: its counters ([fanout.Stats]) and
// their rates, its watchers, and who holds its publishers back.
type BroadcasterView struct {
	Name        string   `json:"name"`
	Accepted    uint64   `json:"accepted"`
	Refused     uint64   `json:"refused"`
	Dropped     uint64   `json:"dropped"`
	Panics      uint64   `json:"panics"`
	WaitReports uint64   `json:"waitReports"`
	Watchers    int      `json:"watcherCount"`
	AcceptedPS  *float64 `json:"acceptedPerSecond"`
	DroppedPS   *float64 `json:"droppedPerSecond"`
	// AcceptedHistory and DroppedHistory are the rates between the
	// samples the page loads kept, oldest first (the sparklines).
	AcceptedHistory []float64 `json:"acceptedHistory"`
	DroppedHistory  []float64 `json:"droppedHistory"`
	// Publishers counts the publish calls waiting now for full watchers
	// ([fanout.Snapshot].Publishers); TurnQueue those queued behind the
	// one that holds the publish turn.
	Publishers int `json:"publishersWaiting"`
	TurnQueue  int `json:"turnQueue"`
	// Waiting lists each watcher a publisher waits for now.
	Waiting []WaitView `json:"waiting"`
	// WatcherList holds the watchers, those that block a publisher first,
	// then the fullest; Omitted counts those left out by the page's limit.
	WatcherList []WatcherView `json:"watchers"`
	Omitted     int           `json:"omittedWatchers,omitempty"`
}

// WaitView is a watcher that a waiting publisher waits for: the data of a
// [fanout.WaitReport].
type WaitView struct {
	WatcherID     uint64  `json:"watcherId"`
	WatcherName   string  `json:"watcherName"`
	Queued        int     `json:"queued"`
	QueueLength   int     `json:"queueLength"`
	Readers       int     `json:"readers"`
	WaitedSeconds float64 `json:"waitedSeconds"`
	// Timed is false when WaitedSeconds counts from the first page load
	// that saw the wait: a lower bound (see [fanout.Wait]).
	Timed bool   `json:"timed"`
	Seq   uint64 `json:"seq"`
}

// WatcherView is one watcher, with its runner if one reads it.
type WatcherView struct {
	ID          uint64  `json:"id"`
	Name        string  `json:"name"`
	Behavior    string  `json:"behavior"`
	Channel     bool    `json:"channel"`
	Readers     int     `json:"readers"`
	Queued      int     `json:"queued"`
	QueueLength int     `json:"queueLength"`
	Fill        float64 `json:"fill"`
	Delivered   uint64  `json:"delivered"`
	Filtered    uint64  `json:"filtered"`
	Dropped     uint64  `json:"dropped"`
	// DroppedBy counts the drops by reason.
	DroppedBy    Drops       `json:"droppedBy"`
	DeliveredPS  *float64    `json:"deliveredPerSecond"`
	DroppedPS    *float64    `json:"droppedPerSecond"`
	BlockingSecs *float64    `json:"blockingSeconds"` // the longest wait for it now; null: blocks nobody
	Runner       *RunnerView `json:"runner,omitempty"`
}

// RunnerView is a runner's counters ([fanout.RunnerStats]).
type RunnerView struct {
	Name      string   `json:"name"`
	Queued    int      `json:"queued"`
	InFlight  int      `json:"inFlight"`
	Received  uint64   `json:"received"`
	Written   uint64   `json:"written"`
	Merged    uint64   `json:"merged"`
	Failures  uint64   `json:"failures"`
	Retries   uint64   `json:"retries"`
	Dropped   uint64   `json:"dropped"`
	DroppedBy Drops    `json:"droppedBy"`
	WrittenPS *float64 `json:"writtenPerSecond"`
}

// Drops counts drops by [fanout.DropReason], each under its name. A
// watcher counts the first five; a runner all of them (its watcher's
// drops included).
type Drops struct {
	Full     uint64 `json:"full"`
	Oldest   uint64 `json:"oldest"`
	Timeout  uint64 `json:"timeout"`
	Evicted  uint64 `json:"evicted"`
	Panic    uint64 `json:"panic"`
	Spam     uint64 `json:"spam,omitempty"`
	Rejected uint64 `json:"rejected,omitempty"`
	Retries  uint64 `json:"retries,omitempty"`
	Shutdown uint64 `json:"shutdown,omitempty"`
}

// reasons returns the non-zero counts with their reasons' names, for the
// page.
func (d Drops) reasons() []Field {
	var out []Field
	for _, f := range []Field{{"full", d.Full}, {"oldest", d.Oldest}, {"timeout", d.Timeout}, {"evicted", d.Evicted},
		{"panic", d.Panic}, {"spam", d.Spam}, {"rejected", d.Rejected}, {"retries", d.Retries}, {"shutdown", d.Shutdown}} {
		if f.Value.(uint64) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// viewOf returns the view of the sections, with their rates, at most limit
// broadcasters per section and watchers per broadcaster (0: all); the
// samples of the stale sources are not kept (see [rates.begin]). Caller
// serializes calls (the rates).
func viewOf(srcs []*registered, secs []Section, r *rates, now time.Time, limit int, stale map[*registered]bool) []SectionView {
	r.begin(stale)
	defer r.end()
	out := make([]SectionView, 0, len(secs))
	for i, sec := range secs {
		sv := SectionView{Name: sec.Name, Kind: sec.Kind, Fields: encodable(sec.Fields)}
		dups := map[string]int{}
		for _, bs := range sec.Broadcasters {
			k := seriesKey{src: srcs[i], broadcaster: bs.Name, key: bs.key}
			if bs.key == nil {
				k.dup = dups[bs.Name]
				dups[bs.Name]++
			}
			sv.Broadcasters = append(sv.Broadcasters, broadcasterView(k, bs, r, now, limit))
		}
		slices.SortStableFunc(sv.Broadcasters, func(a, b BroadcasterView) int {
			return cmp.Compare(b.attention(), a.attention())
		})
		if limit > 0 && len(sv.Broadcasters) > limit {
			sv.Omitted = len(sv.Broadcasters) - limit
			sv.Broadcasters = sv.Broadcasters[:limit]
		}
		out = append(out, sv)
	}
	return out
}

// encodable returns fs, but for each value that encoding/json cannot
// encode (or panics on), the string fmt prints for it instead. fs itself is
// left as it is.
func encodable(fs []Field) []Field {
	var out []Field // nil until a value is replaced
	for i, f := range fs {
		if jsonable(f.Value) {
			continue
		}
		if out == nil {
			out = slices.Clone(fs)
		}
		out[i].Value = fmt.Sprint(f.Value)
	}
	if out == nil {
		return fs
	}
	return out
}

// jsonable reports whether encoding/json encodes v without an error or a
// panic.
func jsonable(v any) bool {
	var err error
	return guard.Call(func() { _, err = json.Marshal(v) }) == nil && err == nil
}

// attention orders the broadcasters of a section: those with a waiting
// publisher first, then those dropping values, the others keeping their
// order.
func (v BroadcasterView) attention() int {
	switch {
	case len(v.Waiting) > 0:
		return 2
	case v.DroppedPS != nil && *v.DroppedPS > 0:
		return 1
	}
	return 0
}

// broadcasterView returns the view of one broadcaster.
func broadcasterView(k seriesKey, bs BroadcasterSnapshot, r *rates, now time.Time, limit int) BroadcasterView {
	st := bs.Snapshot.Stats
	v := BroadcasterView{Name: bs.Name, Accepted: st.Accepted, Refused: st.Refused, Dropped: st.Dropped,
		Panics: st.Panics, WaitReports: st.WaitReports, Watchers: st.Watchers, TurnQueue: bs.Snapshot.TurnQueue,
		Publishers: bs.Snapshot.Publishers, Waiting: []WaitView{}}
	ps, ok, s := r.observe(k, now, [nvals]uint64{st.Accepted, st.Dropped})
	if ok {
		v.AcceptedPS, v.DroppedPS = &ps[0], &ps[1]
	}
	v.AcceptedHistory, v.DroppedHistory = s.history(0), s.history(1)
	blocking := map[uint64]float64{}
	for _, w := range bs.Snapshot.Waiting {
		secs := w.Waited.Seconds()
		v.Waiting = append(v.Waiting, WaitView{WatcherID: w.WatcherID, WatcherName: w.WatcherName, Queued: w.Queued,
			QueueLength: w.QueueLength, Readers: w.Readers, WaitedSeconds: secs, Timed: w.Timed, Seq: w.Seq})
		blocking[w.WatcherID] = max(blocking[w.WatcherID], secs)
	}
	v.WatcherList = watcherRows(k, bs, blocking, r, now)
	slices.SortStableFunc(v.WatcherList, byAttention)
	if limit > 0 && len(v.WatcherList) > limit {
		v.Omitted = len(v.WatcherList) - limit
		v.WatcherList = v.WatcherList[:limit]
	}
	return v
}

// watcherRows returns the view of each watcher of bs, with its rates and
// its runner; blocking holds the longest wait for each watcher a
// publisher waits for.
func watcherRows(k seriesKey, bs BroadcasterSnapshot, blocking map[uint64]float64, r *rates, now time.Time) []WatcherView {
	runners := map[uint64]fanout.RunnerSnapshot{}
	for _, run := range bs.Runners {
		runners[run.WatcherID] = run
	}
	rows := make([]WatcherView, 0, len(bs.Snapshot.Watchers))
	for _, w := range bs.Snapshot.Watchers {
		wv := watcherView(w, runners)
		if secs, ok := blocking[w.ID]; ok {
			wv.BlockingSecs = &secs
		}
		var written uint64
		if wv.Runner != nil {
			written = wv.Runner.Written
		}
		k.row, k.watcher = true, w.ID
		if ps, ok, _ := r.observe(k, now, [nvals]uint64{w.Delivered, w.Dropped, written}); ok {
			wv.DeliveredPS, wv.DroppedPS = &ps[0], &ps[1]
			if wv.Runner != nil {
				wv.Runner.WrittenPS = &ps[2]
			}
		}
		rows = append(rows, wv)
	}
	return rows
}

// byAttention orders watchers: those blocking a publisher first (the
// longest wait first), then the fullest queues, then by ID.
func byAttention(a, b WatcherView) int {
	if c := cmp.Compare(blockSecs(b), blockSecs(a)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Fill, a.Fill); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func blockSecs(w WatcherView) float64 {
	if w.BlockingSecs == nil {
		return -1
	}
	return *w.BlockingSecs
}

// watcherView returns the view of a watcher, and of its runner if it has
// one.
func watcherView(w fanout.WatcherSnapshot, runners map[uint64]fanout.RunnerSnapshot) WatcherView {
	v := WatcherView{ID: w.ID, Name: w.Name, Behavior: w.Behavior, Channel: w.Channel, Readers: w.Readers,
		Queued: w.Queued, QueueLength: w.QueueLength, Delivered: w.Delivered, Filtered: w.Filtered, Dropped: w.Dropped,
		DroppedBy: Drops{Full: w.DroppedFull, Oldest: w.DroppedOldest, Timeout: w.DroppedTimeout,
			Evicted: w.DroppedEvicted, Panic: w.DroppedPanic}}
	switch {
	case w.QueueLength > 0:
		v.Fill = min(float64(w.Queued)/float64(w.QueueLength), 1)
	case w.Queued > 0:
		v.Fill = 1
	}
	if run, ok := runners[w.ID]; ok {
		v.Runner = runnerView(run)
	}
	return v
}

func runnerView(run fanout.RunnerSnapshot) *RunnerView {
	s := run.Stats
	v := &RunnerView{Name: run.Name, Queued: s.Queued, InFlight: s.InFlight, Received: s.Received, Written: s.Written,
		Merged: s.Merged, Failures: s.Failures, Retries: s.Retries, Dropped: s.Dropped,
		DroppedBy: Drops{Full: s.DroppedFull, Oldest: s.DroppedOldest, Timeout: s.DroppedTimeout,
			Evicted: s.DroppedEvicted, Panic: s.DroppedPanic, Spam: s.DroppedSpam, Rejected: s.DroppedRejected,
			Retries: s.DroppedRetries, Shutdown: s.DroppedShutdown}}
	return v
}
