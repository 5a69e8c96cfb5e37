package debug_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/debug"
)

// get serves one request and returns the response.
func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// page returns the JSON page.
func page(t *testing.T, h http.Handler, query string) debug.Page {
	t.Helper()
	rec := get(t, h, http.MethodGet, "/?format=json"+query)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var p debug.Page
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	return p
}

func newHandler(t *testing.T, opts ...debug.Option) *debug.Handler {
	t.Helper()
	h, err := debug.New(opts...)
	require.NoError(t, err)
	return h
}

// stall makes slow (queue 2, WaitIfChannelFull, unread) full and starts a
// publisher that waits for it; the returned channel gets its result.
func stall(t *testing.T, b *fanout.Broadcaster[int]) chan error {
	t.Helper()
	for i := range 2 {
		require.NoError(t, b.Action(i))
	}
	done := make(chan error, 1)
	go func() { done <- b.Action(2) }()
	synctest.Wait()
	return done
}

func TestPageShowsTheWatcherThatBlocksAWaitingPublisherFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		for range 3 {
			_, err := b.Watch(fanout.WithName("lossy"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			require.NoError(t, err)
		}
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		h := newHandler(t)
		h.Register(debug.Broadcaster("events", b))
		done := stall(t, b)

		p := page(t, h, "")
		time.Sleep(7 * time.Second)
		p = page(t, h, "")
		require.Len(t, p.Sections, 1)
		require.Len(t, p.Sections[0].Broadcasters, 1)
		bv := p.Sections[0].Broadcasters[0]
		require.Len(t, bv.Waiting, 1)
		assert.Equal(t, debug.WaitView{WatcherID: slow.ID(), WatcherName: "slow", Queued: 2, QueueLength: 2,
			WaitedSeconds: 7, Seq: 2}, bv.Waiting[0], "waited since the first page load saw it")
		assert.Equal(t, 1, bv.Publishers)
		require.Len(t, bv.WatcherList, 4)
		first := bv.WatcherList[0]
		assert.Equal(t, slow.ID(), first.ID, "the blocking watcher comes first")
		require.NotNil(t, first.BlockingSecs)
		assert.Equal(t, 7.0, *first.BlockingSecs)
		assert.Equal(t, 1.0, first.Fill)
		for _, w := range bv.WatcherList[1:] {
			assert.Nil(t, w.BlockingSecs, "the lossy watchers block nobody")
		}

		_, err = slow.Next(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-done)
		p = page(t, h, "")
		assert.Empty(t, p.Sections[0].Broadcasters[0].Waiting)
	})
}

func TestJSONCountsAreThoseOfStats(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(3))
	defer b.Shutdown()
	lossy, err := b.Watch(fanout.WithName("lossy"), fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	require.NoError(t, err)
	evens, err := b.Watch(fanout.WithName("evens"), fanout.WithFilter(func(v int) bool { return v%2 == 0 }),
		fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, b.Action(i))
	}
	_, err = lossy.Next(context.Background())
	require.NoError(t, err)
	_, _ = evens.Next(context.Background())
	ok, err := b.ActionOrDrop(10) // nothing waits: accepted
	require.NoError(t, err)
	require.True(t, ok)

	h := newHandler(t)
	h.Register(debug.Broadcaster("b", b))
	bv := page(t, h, "").Sections[0].Broadcasters[0]
	st := b.Stats()
	assert.Equal(t, []uint64{st.Accepted, st.Refused, st.Dropped, st.Panics, st.WaitReports},
		[]uint64{bv.Accepted, bv.Refused, bv.Dropped, bv.Panics, bv.WaitReports})
	assert.Equal(t, st.Watchers, bv.Watchers)
	for _, w := range []*fanout.Watcher[int]{lossy, evens} {
		ws := w.Stats()
		var got *debug.WatcherView
		for i := range bv.WatcherList {
			if bv.WatcherList[i].ID == ws.ID {
				got = &bv.WatcherList[i]
			}
		}
		require.NotNil(t, got, ws.Name)
		assert.Equal(t, ws.Name, got.Name)
		assert.Equal(t, []uint64{ws.Delivered, ws.Filtered, ws.Dropped, ws.DroppedFull, ws.DroppedOldest},
			[]uint64{got.Delivered, got.Filtered, got.Dropped, got.DroppedBy.Full, got.DroppedBy.Oldest}, ws.Name)
		assert.Equal(t, []int{ws.Queued, ws.QueueLength}, []int{got.Queued, got.QueueLength}, ws.Name)
	}
}

func TestRatesComeFromThePageLoadsInTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int]()
		defer b.Shutdown()
		_, err := b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull), fanout.WithQueueLength(1))
		require.NoError(t, err)
		h := newHandler(t, debug.WithRateWindow(4*time.Second))
		h.Register(debug.Broadcaster("b", b))
		bv := page(t, h, "").Sections[0].Broadcasters[0]
		assert.Nil(t, bv.AcceptedPS, "no rate before a second sample")
		for range 6 {
			time.Sleep(time.Second)
			for i := range 10 {
				require.NoError(t, b.Action(i))
			}
			page(t, h, "")
		}
		bv = page(t, h, "").Sections[0].Broadcasters[0]
		require.NotNil(t, bv.AcceptedPS)
		assert.Equal(t, 10.0, *bv.AcceptedPS, "40 values over the 4 s window")
		assert.Equal(t, 10.0, *bv.DroppedPS, "the unread queue of 1 has been full since the first burst")
		assert.Equal(t, []float64{10, 10, 10, 10}, bv.AcceptedHistory[len(bv.AcceptedHistory)-4:])
		require.NotNil(t, bv.WatcherList[0].DroppedPS)
		assert.Equal(t, 10.0, *bv.WatcherList[0].DroppedPS)
	})
}

func TestAPageLoadSoonAfterAnotherKeepsNoSampleButHasARate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int]()
		defer b.Shutdown()
		h := newHandler(t)
		h.Register(debug.Broadcaster("b", b))
		page(t, h, "")
		time.Sleep(2 * time.Second)
		require.NoError(t, b.Action(1))
		page(t, h, "")
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, b.Action(2))
		bv := page(t, h, "").Sections[0].Broadcasters[0]
		require.NotNil(t, bv.AcceptedPS)
		assert.InDelta(t, 2/2.1, *bv.AcceptedPS, 1e-9, "from the oldest sample in the window")
		assert.Len(t, bv.AcceptedHistory, 1, "the last load was too soon to be kept")
	})
}

func TestCountersThatGoDownStartTheirRatesAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur := fanout.New[int]()
		h := newHandler(t)
		h.Register(debug.SourceFunc(func() debug.Section {
			return debug.Section{Name: "pipeline", Broadcasters: []debug.BroadcasterSnapshot{debug.BroadcasterOf("b", cur)}}
		}))
		for i := range 100 {
			require.NoError(t, cur.Action(i))
		}
		page(t, h, "")
		time.Sleep(time.Second)
		require.NoError(t, cur.Action(100))
		require.NotNil(t, page(t, h, "").Sections[0].Broadcasters[0].AcceptedPS)
		cur.Shutdown()
		cur = fanout.New[int]() // a new term: its counters at zero
		defer cur.Shutdown()
		time.Sleep(time.Second)
		bv := page(t, h, "").Sections[0].Broadcasters[0]
		assert.Nil(t, bv.AcceptedPS, "no negative rate: the series started again")
		assert.Equal(t, uint64(0), bv.Accepted)
	})
}

// Two page loads at once (two tabs, a tab and a scraper): the one that
// read the counters first keeps its samples last. Its counters are lower
// than the last sample, but no counter went down: it has a rate, and the
// series keeps its history.
func TestAPageLoadOlderThanTheLastKeptDoesNotResetTheRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t)
		var accepted atomic.Uint64
		hold := make(chan chan struct{}, 1) // a read takes one, if any, and waits on it
		h.Register(debug.SourceFunc(func() debug.Section {
			sec := debug.Section{Name: "s", Broadcasters: []debug.BroadcasterSnapshot{
				{Name: "b", Snapshot: fanout.Snapshot{Stats: fanout.Stats{Accepted: accepted.Add(10)}}}}}
			select {
			case release := <-hold:
				<-release
			default:
			}
			return sec
		}))
		for range 3 { // 10, 20, 30 a second apart
			h.Page(0)
			time.Sleep(time.Second)
		}
		release := make(chan struct{})
		hold <- release
		older := make(chan debug.Page)
		go func() { older <- h.Page(0) }() // reads 40, then waits
		synctest.Wait()
		h.Page(0) // reads 50, kept first
		close(release)
		a := <-older
		time.Sleep(time.Second)
		c := h.Page(0).Sections[0].Broadcasters[0] // 60

		require.NotNil(t, a.Sections[0].Broadcasters[0].AcceptedPS, "the older load's rate")
		assert.Equal(t, 10.0, *a.Sections[0].Broadcasters[0].AcceptedPS, "40 against the oldest sample, 10, 3 s before")
		assert.Equal(t, []float64{10, 10, 20, 10}, c.AcceptedHistory, "the history is kept, the older load's sample is not")
	})
}

func TestOnlyGETAndHEADAreServed(t *testing.T) {
	h := newHandler(t)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		rec := get(t, h, m, "/")
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, m)
		assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	}
	assert.Equal(t, http.StatusOK, get(t, h, http.MethodHead, "/").Code)
}

func TestBadParametersAreRefusedWithTheirName(t *testing.T) {
	h := newHandler(t)
	for q, want := range map[string]string{"?format=xml": "format", "?limit=-1": "limit", "?limit=many": "limit"} {
		rec := get(t, h, http.MethodGet, "/"+q)
		assert.Equal(t, http.StatusBadRequest, rec.Code, q)
		assert.Contains(t, rec.Body.String(), want, q)
	}
}

func TestNewRefusesOptionsItCannotMean(t *testing.T) {
	for name, opt := range map[string]debug.Option{
		"WithRefresh":    debug.WithRefresh(0),
		"WithRateWindow": debug.WithRateWindow(time.Millisecond),
		"WithLimit":      debug.WithLimit(-1),
	} {
		_, err := debug.New(opt)
		assert.ErrorContains(t, err, name)
	}
}

func TestTheLimitKeepsThoseThatNeedAttention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		for range 9 {
			_, err := b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			require.NoError(t, err)
		}
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		h := newHandler(t, debug.WithLimit(3))
		h.Register(debug.Broadcaster("b", b))
		done := stall(t, b)
		rec := get(t, h, http.MethodGet, "/")
		assert.Equal(t, 3, strings.Count(rec.Body.String(), "<tr data-watcher-id="))
		assert.Contains(t, rec.Body.String(), "7 more watchers not shown")
		bv := page(t, h, "&limit=3").Sections[0].Broadcasters[0]
		assert.Equal(t, 7, bv.Omitted)
		assert.Equal(t, slow.ID(), bv.WatcherList[0].ID)
		assert.Len(t, page(t, h, "").Sections[0].Broadcasters[0].WatcherList, 10, "the JSON lists all by default")
		slow.Stop()
		require.NoError(t, <-done)
	})
}

func TestTheHTMLEscapesNamesAndLoadsNothingElse(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	_, err := b.Watch(fanout.WithName(`<script>alert(1)</script>`))
	require.NoError(t, err)
	h := newHandler(t)
	h.Register(debug.Broadcaster(`<img src=x>`, b))
	rec := get(t, h, http.MethodGet, "/")
	body := rec.Body.String()
	assert.NotContains(t, body, "<script>alert(1)")
	assert.NotContains(t, body, "<img src=x>")
	assert.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.Equal(t, 1, strings.Count(body, "<script"), "the page's own script only")
	for _, attr := range []string{"src=", "http://", "https://", "@import", "url("} {
		assert.NotContains(t, strings.ReplaceAll(body, "&lt;img src=x&gt;", ""), attr)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "connect-src 'self'")
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
}

func TestTheFragmentIsTheViewAlone(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	h := newHandler(t)
	h.Register(debug.Broadcaster("b", b))
	body := get(t, h, http.MethodGet, "/?format=fragment").Body.String()
	assert.NotContains(t, body, "<html")
	assert.NotContains(t, body, "<script")
	assert.Contains(t, body, `data-broadcaster="b"`)
}

func TestSourcesAreReadOnlyWhenThePageIsLoaded(t *testing.T) {
	h := newHandler(t)
	reads := 0
	unregister := h.Register(debug.Fields("app", func() []debug.Field {
		reads++
		return []debug.Field{{Name: "leader", Value: true}, {Name: "lag", Value: 3}}
	}))
	assert.Equal(t, 0, reads, "registering reads nothing")
	p := page(t, h, "")
	assert.Equal(t, 1, reads)
	require.Len(t, p.Sections, 1)
	assert.Equal(t, []debug.Field{{Name: "leader", Value: true}, {Name: "lag", Value: 3.0}}, p.Sections[0].Fields)
	unregister()
	unregister()
	assert.Empty(t, page(t, h, "").Sections)
	assert.Equal(t, 1, reads)
}

// A Fields value that encoding/json refuses (NaN or ±Inf: a ratio over
// nothing yet) or panics on is served as fmt prints it: the rest of the
// page is not lost.
func TestAFieldThatJSONCannotEncodeIsServedAsItPrints(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	h := newHandler(t)
	h.Register(debug.Broadcaster("orders", b))
	h.Register(debug.Fields("exporter", func() []debug.Field {
		return []debug.Field{{Name: "hit ratio", Value: math.NaN()}, {Name: "lag seconds", Value: math.Inf(1)},
			{Name: "broken", Value: panickyJSON{}}, {Name: "ok", Value: 1}}
	}))
	p := page(t, h, "")
	require.Len(t, p.Sections, 2)
	assert.Equal(t, "orders", p.Sections[0].Name)
	assert.Equal(t, []debug.Field{{Name: "hit ratio", Value: "NaN"}, {Name: "lag seconds", Value: "+Inf"},
		{Name: "broken", Value: "{}"}, {Name: "ok", Value: 1.0}}, p.Sections[1].Fields)
}

// panickyJSON's MarshalJSON panics.
type panickyJSON struct{}

func (panickyJSON) MarshalJSON() ([]byte, error) { panic("no JSON") }

func TestASourceThatPanicsShowsThePanic(t *testing.T) {
	h := newHandler(t)
	h.Register(debug.SourceFunc(func() debug.Section { panic("broken source") }))
	p := page(t, h, "")
	require.Len(t, p.Sections, 1)
	assert.Equal(t, "error", p.Sections[0].Kind)
	assert.Contains(t, p.Sections[0].Fields[0].Value, "broken source")
}

func TestTopicsShowEachTopicAsABroadcaster(t *testing.T) {
	tp := fanout.NewTopics[int, string]()
	defer tp.Shutdown()
	for _, k := range []int{3, 1, 2} {
		_, err := tp.Watch(k, fanout.WithName("on"))
		require.NoError(t, err)
	}
	require.NoError(t, tp.Publish(2, "x"))
	h := newHandler(t)
	h.Register(debug.Topics("orders", tp))
	sec := page(t, h, "").Sections[0]
	assert.Equal(t, "topics", sec.Kind)
	var names []string
	for _, bv := range sec.Broadcasters {
		names = append(names, bv.Name)
	}
	assert.Equal(t, []string{"1", "2", "3"}, names)
	assert.Equal(t, uint64(1), sec.Broadcasters[1].Accepted)
	assert.Contains(t, sec.Fields, debug.Field{Name: "published", Value: 1.0})
}

// Two topics whose keys print alike are two broadcasters of one name: each
// keeps its own rates, and their order, from one page load to the next.
func TestTopicsWhoseKeysPrintAlikeKeepTheirRatesAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{ NS, Name string }
		tp := fanout.NewTopics[key, int]()
		defer tp.Shutdown()
		busy, idle := key{"a b", "c"}, key{"a", "b c"} // both print {a b c}
		for _, k := range []key{idle, busy} {
			_, err := tp.Watch(k, fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			require.NoError(t, err)
		}
		for i := range 100 {
			require.NoError(t, tp.Publish(busy, i))
		}
		h := newHandler(t)
		h.Register(debug.Topics("t", tp))
		page(t, h, "")
		for load := range 20 { // nothing is published any more: every rate is 0
			time.Sleep(time.Second)
			bvs := page(t, h, "").Sections[0].Broadcasters
			require.Len(t, bvs, 2)
			assert.Equal(t, []uint64{100, 0}, []uint64{bvs[0].Accepted, bvs[1].Accepted}, "load %d: by key: {NS:\"a b\"} first", load)
			for _, bv := range bvs {
				require.NotNil(t, bv.AcceptedPS, "load %d", load)
				require.Zero(t, *bv.AcceptedPS, "load %d: accepted %d", load, bv.Accepted)
			}
		}
	})
}

func TestARecordersRunnersAreShownBesideTheirWatchers(t *testing.T) {
	r, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	_, err = r.StartHandler(func(int) {})
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, r.Record(i))
	}
	require.NoError(t, r.Flush(context.Background()))
	h := newHandler(t)
	h.Register(debug.Recorder("audit", r))
	sec := page(t, h, "").Sections[0]
	assert.Equal(t, "recorder", sec.Kind)
	assert.Contains(t, sec.Fields, debug.Field{Name: "recorded", Value: 5.0})
	w := sec.Broadcasters[0].WatcherList[0]
	require.NotNil(t, w.Runner)
	assert.Equal(t, "handler", w.Runner.Name)
	assert.Equal(t, uint64(5), w.Runner.Written)
	assert.Contains(t, get(t, h, http.MethodGet, "/").Body.String(), `data-field="written">5<`)
}

func TestABatchRunnerShowsItsWritesInFlight(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	w, err := b.Watch(fanout.WithName("archive"))
	require.NoError(t, err)
	writing, release := make(chan struct{}), make(chan struct{})
	run, err := fanout.StartBatchSink(context.Background(), w, blockingSink{writing, release},
		fanout.BatchConfig[int]{Name: "archive"})
	require.NoError(t, err)
	require.NoError(t, b.Action(1))
	<-writing
	h := newHandler(t)
	h.Register(debug.Broadcaster("b", b, run))
	rv := page(t, h, "").Sections[0].Broadcasters[0].WatcherList[0].Runner
	require.NotNil(t, rv)
	assert.Equal(t, 1, rv.InFlight)
	assert.Equal(t, "archive", rv.Name)
	close(release)
	b.Shutdown()
	<-run.Done()
}

// blockingSink signals each write on writing and waits for release.
type blockingSink struct{ writing, release chan struct{} }

func (s blockingSink) Write(_ context.Context, vs []int) (int, error) {
	s.writing <- struct{}{}
	<-s.release
	return len(vs), nil
}
