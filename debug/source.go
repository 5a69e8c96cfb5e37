package debug

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fanout-go/fanout"
)

// Source is one section of the view: something a program registers with
// [Handler.Register]. Its Section is called at each page load (and each of
// the page's refreshes), never otherwise. The constructors of this package
// make the usual ones ([Broadcaster], [Topics], [Recorder], [Fields]);
// [SourceFunc] makes any other, such as one that combines them.
type Source interface {
	Section() Section
}

// SourceFunc is a [Source] made of a function.
type SourceFunc func() Section

// Section returns f().
func (f SourceFunc) Section() Section { return f() }

// Section is what a [Source] shows at one moment: named values, and
// broadcasters with their watchers and runners. It holds names and
// counts, never a published value.
type Section struct {
	// Name titles the section; Kind says what it is ("broadcaster",
	// "topics", "recorder", "fields", or a program's own word).
	Name, Kind string
	// Fields are named values shown as a table: totals, states, times.
	Fields []Field
	// Broadcasters are the section's broadcasters (one per topic for a
	// [Topics]).
	Broadcasters []BroadcasterSnapshot
}

// Field is a named value of a [Section]. Value is shown as fmt prints it
// and encoded as encoding/json does: a number, a string, a bool or a
// time.Time is what a tool reading the JSON expects (give a duration in
// seconds, as a float64). A value that encoding/json cannot encode (NaN or
// ±Inf, a channel, a MarshalJSON that fails or panics) is replaced, in the
// [Page], by the string fmt prints for it, so that it loses nothing else.
type Field struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// BroadcasterSnapshot is one broadcaster of a [Section]: a name, its
// [fanout.Snapshot], and the snapshots of the runners reading its
// watchers, each shown beside its watcher. The rates of a section's
// broadcasters of the same Name are told apart by their order in the
// section (those of a [Topics] by their keys).
type BroadcasterSnapshot struct {
	Name     string
	Snapshot fanout.Snapshot
	Runners  []fanout.RunnerSnapshot

	// key, if not nil, is the same for the same broadcaster at each page
	// load and tells its rates from those of the section's others of the
	// same Name (a topic's key); without one, their order does.
	key any
}

// Broadcaster returns the source of one broadcaster, named name, with the
// runners started on its watchers ([fanout.StartBatchSink]), which are
// shown beside them. It reads [fanout.Broadcaster.Snapshot] and each
// [fanout.Runner.Snapshot] when the page is loaded.
func Broadcaster[T any](name string, b *fanout.Broadcaster[T], runners ...*fanout.Runner[T]) Source {
	return SourceFunc(func() Section {
		return Section{Name: name, Kind: "broadcaster", Broadcasters: []BroadcasterSnapshot{BroadcasterOf(name, b, runners...)}}
	})
}

// BroadcasterOf returns the [BroadcasterSnapshot] of b and its runners
// now, for a [SourceFunc] that shows a broadcaster among other things.
func BroadcasterOf[T any](name string, b *fanout.Broadcaster[T], runners ...*fanout.Runner[T]) BroadcasterSnapshot {
	bs := BroadcasterSnapshot{Name: name, Snapshot: b.Snapshot()}
	for _, run := range runners {
		bs.Runners = append(bs.Runners, run.Snapshot())
	}
	return bs
}

// Topics returns the source of a family of topics, named name: its totals,
// and one broadcaster per topic that exists, named by its key as fmt
// prints it (%v), in the order of those names (keys that print alike in
// the order of their type and Go syntax, %T %#v). Each topic keeps its own
// rates, whatever its name. It reads [fanout.Topics.Snapshot] when the
// page is loaded.
func Topics[K comparable, T any](name string, t *fanout.Topics[K, T]) Source {
	return SourceFunc(func() Section {
		s := t.Snapshot()
		sec := Section{Name: name, Kind: "topics", Fields: []Field{
			{"topics", s.Stats.Topics}, {"published", s.Stats.Published},
			{"unheard", s.Stats.Unheard}, {"retired", s.Stats.Retired},
		}}
		for k, snap := range s.Topics {
			sec.Broadcasters = append(sec.Broadcasters, BroadcasterSnapshot{Name: fmt.Sprint(k), Snapshot: snap, key: topicKey[K]{k}})
		}
		slices.SortFunc(sec.Broadcasters, byTopic[K])
		return sec
	})
}

// topicKey is a topic's key as a [BroadcasterSnapshot]'s key: never nil.
type topicKey[K comparable] struct{ k K }

// byTopic orders topics by name, then those whose keys print alike by
// their keys' type and Go syntax.
func byTopic[K comparable](a, b BroadcasterSnapshot) int {
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(goSyntax[K](a), goSyntax[K](b)) // rare: printed only for names alike
}

// goSyntax returns the type and Go syntax of a topic's key.
func goSyntax[K comparable](bs BroadcasterSnapshot) string {
	k := bs.key.(topicKey[K]).k
	return fmt.Sprintf("%T %#v", k, k)
}

// RecorderSnapshotter is what [Recorder] shows: a [fanout.Recorder], or
// what is built on one and gives its snapshot, such as the broadcasters of
// github.com/fanout-go/fanout/k8s/record and k8s/events.
type RecorderSnapshotter interface {
	Snapshot() fanout.RecorderSnapshot
}

// Recorder returns the source of a recorder, named name: its totals
// (every runner it started, those exited included), and its broadcaster,
// whose watchers are its runners (named "sink <type>" or "handler") and
// the watchers of [fanout.Recorder.Watch]. It reads r's Snapshot
// ([fanout.Recorder.Snapshot]) when the page is loaded.
func Recorder(name string, r RecorderSnapshotter) Source {
	return SourceFunc(func() Section {
		s := r.Snapshot()
		st := s.Stats
		return Section{Name: name, Kind: "recorder", Fields: []Field{
			{"recorded", st.Recorded}, {"refused", st.Refused}, {"runners", st.Runners},
			{"written", st.Written}, {"merged", st.Merged}, {"failures", st.Failures},
			{"retries", st.Retries}, {"dropped", st.Dropped},
		}, Broadcasters: []BroadcasterSnapshot{{Name: name, Snapshot: s.Broadcaster, Runners: s.Runners}}}
	})
}

// Fields returns a source that shows the named values f returns, called
// at each page load: a program's own state (the exporter's leader state
// and checkpoint lag, say).
func Fields(name string, f func() []Field) Source {
	return SourceFunc(func() Section { return Section{Name: name, Kind: "fields", Fields: f()} })
}
