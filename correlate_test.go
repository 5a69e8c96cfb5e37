package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// ev is a log-like event: the correlator tests aggregate by (Obj, Reason),
// count identical (Obj, Reason, Msg) and filter spam per Obj.
type ev struct {
	Obj, Reason, Msg string
	Count            int
	First, Last      time.Time
	ID               string // set by the "server"
}

// manualClock is a Clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func aggStage() *fanout.AggregateStage[ev] {
	return &fanout.AggregateStage[ev]{
		Key: func(e ev) (string, string) { return e.Obj + "/" + e.Reason, e.Msg },
		Combine: func(e ev, now time.Time) ev {
			return ev{Obj: e.Obj, Reason: e.Reason, Msg: "(combined) " + e.Reason, Count: 1, First: now, Last: now}
		},
	}
}

func dedupStage() *fanout.DedupStage[ev] {
	return &fanout.DedupStage[ev]{
		Key: func(e ev) string { return e.Obj + "/" + e.Reason + "/" + e.Msg },
		Repeat: func(e, prev ev, n int) ev {
			e.ID, e.First, e.Count = prev.ID, prev.First, n
			return e
		},
	}
}

func spamStage(burst int, rate float64) *fanout.SpamStage[ev] {
	return &fanout.SpamStage[ev]{Key: func(e ev) string { return e.Obj }, Burst: burst, Rate: rate}
}

func newCorrelator(t *testing.T, cfg fanout.CorrelatorConfig[ev]) *fanout.Correlator[ev] {
	t.Helper()
	c, err := fanout.NewCorrelator(cfg)
	require.NoError(t, err)
	return c
}

func TestCorrelatorConfigErrors(t *testing.T) {
	key := func(ev) string { return "" }
	for name, cfg := range map[string]fanout.CorrelatorConfig[ev]{
		"negative cache":       {CacheSize: -1},
		"aggregate no key":     {Aggregate: &fanout.AggregateStage[ev]{}},
		"aggregate negative":   {Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key, MaxKeys: -1}},
		"aggregate interval":   {Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key, Interval: -time.Second}},
		"dedup no key":         {Dedup: &fanout.DedupStage[ev]{}},
		"dedup two keys":       {Dedup: &fanout.DedupStage[ev]{Key: key, AppendKey: appendKey}},
		"write first no merge": {Dedup: &fanout.DedupStage[ev]{Key: key, WriteFirst: 2}},
		"negative write first": {Dedup: &fanout.DedupStage[ev]{Key: key, Merge: mark, WriteFirst: -1}},
		"spam no key":          {Spam: &fanout.SpamStage[ev]{}},
		"spam negative burst":  {Spam: &fanout.SpamStage[ev]{Key: key, Burst: -1}},
		"spam negative rate":   {Spam: &fanout.SpamStage[ev]{Key: key, Rate: -1}},
		"spam NaN rate":        {Spam: &fanout.SpamStage[ev]{Key: key, Rate: math.NaN()}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := fanout.NewCorrelator(cfg)
			assert.Error(t, err)
			assert.Nil(t, c)
			assert.True(t, strings.HasPrefix(err.Error(), "fanout: "), err.Error())
		})
	}
}

func TestCorrelatorNoStages(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{})
	for range 100 {
		r := c.Correlate(ev{Obj: "a", Msg: "m"})
		assert.Equal(t, fanout.Correlation[ev]{Value: ev{Obj: "a", Msg: "m"}, Count: 1}, r)
	}
	c.Observe(ev{Obj: "a"}) // no dedup stage: nothing to do
}

func TestCorrelatorAggregate(t *testing.T) {
	type step struct {
		advance    time.Duration
		msg        string
		aggregated bool
		count      int
	}
	msgs := func(from, to int) []step {
		var s []step
		for i := from; i <= to; i++ {
			s = append(s, step{advance: time.Second, msg: fmt.Sprint("m", i), count: 1})
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var s []step
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	for name, steps := range map[string][]step{
		"nine distinct stay apart": msgs(1, 9),
		"the tenth distinct is combined": cat(msgs(1, 9),
			[]step{{advance: time.Second, msg: "m10", aggregated: true, count: 1}}),
		"later distinct ones count the combined one": cat(msgs(1, 9), []step{
			{advance: time.Second, msg: "m10", aggregated: true, count: 1},
			{advance: time.Second, msg: "m11", aggregated: true, count: 2},
			{advance: time.Second, msg: "m12", aggregated: true, count: 3},
		}),
		"repeats are not distinct": cat(msgs(1, 5), []step{
			{advance: time.Second, msg: "m1", count: 2},
			{advance: time.Second, msg: "m2", count: 2},
			{advance: time.Second, msg: "m3", count: 2},
			{advance: time.Second, msg: "m4", count: 2},
			{advance: time.Second, msg: "m5", count: 2},
		}),
		"a gap of exactly the interval keeps the group": cat(msgs(1, 8), []step{
			{advance: 600 * time.Second, msg: "m9", count: 1},
			{advance: 600 * time.Second, msg: "m10", aggregated: true, count: 1},
		}),
		"a longer gap starts afresh": cat(msgs(1, 9), []step{
			{advance: 600*time.Second + time.Nanosecond, msg: "m10", count: 1},
			{advance: time.Second, msg: "m11", count: 1},
		}),
		// After combining, the oldest local key is forgotten: m1 is new
		// again (combined), m9 is still known (not combined).
		"the oldest key is forgotten at the threshold": cat(msgs(1, 9), []step{
			{advance: time.Second, msg: "m10", aggregated: true, count: 1},
			{advance: time.Second, msg: "m9", count: 2},
			{advance: time.Second, msg: "m1", aggregated: true, count: 2},
		}),
	} {
		t.Run(name, func(t *testing.T) {
			clk := newManualClock()
			c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Aggregate: aggStage(), Dedup: dedupStage(), Clock: clk})
			for i, s := range steps {
				clk.Advance(s.advance)
				r := c.Correlate(ev{Obj: "pod", Reason: "Failed", Msg: s.msg})
				assert.Equal(t, s.aggregated, r.Aggregated, "step %d (%s)", i, s.msg)
				assert.Equal(t, s.count, r.Count, "step %d (%s)", i, s.msg)
				if s.aggregated {
					assert.Equal(t, "(combined) Failed", r.Value.Msg)
					assert.Equal(t, "pod/Failed", r.Key, "a combined value is counted under its group")
				} else {
					assert.Equal(t, s.msg, r.Value.Msg)
					assert.Equal(t, "pod/Failed/"+s.msg, r.Key)
				}
			}
		})
	}
}

func TestCorrelatorAggregateGroupsApart(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Aggregate: aggStage()})
	for i := range 9 {
		assert.False(t, c.Correlate(ev{Obj: "a", Reason: "R", Msg: fmt.Sprint(i)}).Aggregated)
		assert.False(t, c.Correlate(ev{Obj: "b", Reason: "R", Msg: fmt.Sprint(i)}).Aggregated)
		assert.False(t, c.Correlate(ev{Obj: "a", Reason: "S", Msg: fmt.Sprint(i)}).Aggregated)
	}
	assert.True(t, c.Correlate(ev{Obj: "a", Reason: "R", Msg: "x"}).Aggregated)
}

func TestCorrelatorAggregateOptions(t *testing.T) {
	clk := newManualClock()
	st := &fanout.AggregateStage[ev]{Key: aggStage().Key, MaxKeys: 2, Interval: time.Minute}
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Aggregate: st, Clock: clk})
	assert.False(t, c.Correlate(ev{Msg: "a"}).Aggregated)
	r := c.Correlate(ev{Msg: "b"})
	assert.True(t, r.Aggregated)
	assert.Equal(t, ev{Msg: "b"}, r.Value, "without Combine the value is kept")
	clk.Advance(time.Minute + 1)
	assert.False(t, c.Correlate(ev{Msg: "c"}).Aggregated)
}

func TestCorrelatorDedup(t *testing.T) {
	clk := newManualClock()
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Clock: clk})
	first := c.Correlate(ev{Obj: "pod", Reason: "R", Msg: "m", First: clk.Now()})
	assert.Equal(t, 1, first.Count)

	// The sink stored it and gave it an ID.
	stored := first.Value
	stored.ID, stored.Count = "id-1", 1
	c.Observe(stored)

	for n := 2; n <= 5; n++ {
		clk.Advance(time.Second)
		r := c.Correlate(ev{Obj: "pod", Reason: "R", Msg: "m", First: clk.Now()})
		assert.Equal(t, n, r.Count)
		assert.Equal(t, n, r.Value.Count)
		assert.Equal(t, "id-1", r.Value.ID, "a repeat refers to the stored record")
		assert.Equal(t, stored.First, r.Value.First, "first timestamp is the first occurrence's")
	}
	other := c.Correlate(ev{Obj: "pod", Reason: "R", Msg: "other"})
	assert.Equal(t, 1, other.Count, "a different key is a first occurrence")
}

func TestCorrelatorDedupCount(t *testing.T) {
	st := dedupStage()
	st.Count = func(e ev) int { return e.Count }
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: st})

	// A first occurrence carries its own count.
	assert.Equal(t, 5, c.Correlate(ev{Msg: "five", Count: 5}).Count)
	assert.Equal(t, 6, c.Correlate(ev{Msg: "five"}).Count)

	// A remembered count of 0 means never seen (client-go's rule).
	assert.Equal(t, 0, c.Correlate(ev{Msg: "zero", Count: 0}).Count)
	assert.Equal(t, 0, c.Correlate(ev{Msg: "zero", Count: 0}).Count)

	// Observe takes the stored value's count.
	c.Observe(ev{Msg: "five", Count: 40, ID: "x"})
	r := c.Correlate(ev{Msg: "five"})
	assert.Equal(t, 41, r.Count)
	assert.Equal(t, "x", r.Value.ID)
}

// appendKey is dedupStage's key, appended.
func appendKey(dst []byte, e ev) []byte {
	dst = append(dst, e.Obj...)
	dst = append(append(dst, '/'), e.Reason...)
	return append(append(dst, '/'), e.Msg...)
}

// A correlator whose dedup stage appends its keys decides as one whose
// stage returns them, evictions and aggregates included, and the keys of
// its decisions stay as they were when later keys are built.
func TestCorrelatorAppendKeyDecidesAsKey(t *testing.T) {
	appending := dedupStage()
	appending.Key, appending.AppendKey = nil, appendKey
	agg := aggStage()
	agg.MaxKeys = 3
	clk := newManualClock()
	byKey := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Aggregate: agg, CacheSize: 6, Clock: clk})
	byAppend := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: appending, Aggregate: agg, CacheSize: 6, Clock: clk})
	var want, got []fanout.Correlation[ev]
	for i := range 200 {
		// Reason R0 varies its message (aggregates), R1 does not (repeats).
		e := ev{Obj: fmt.Sprint("pod", (i/5)%3), Reason: fmt.Sprint("R", i%2), Msg: fmt.Sprint("m", (i/2)%9*(1-i%2))}
		if i%11 == 0 {
			e.ID = fmt.Sprint("stored", i)
			byKey.Observe(e)
			byAppend.Observe(e)
			continue
		}
		want = append(want, byKey.Correlate(e))
		got = append(got, byAppend.Correlate(e))
		clk.Advance(time.Second)
	}
	require.Equal(t, want, got)
	var firsts, repeats, aggregated int
	for _, r := range got {
		switch {
		case r.Aggregated:
			aggregated++
		case r.Count > 1:
			repeats++
		default:
			firsts++
		}
	}
	assert.Positive(t, firsts, "the sequence has first occurrences")
	assert.Positive(t, repeats, "repeats")
	assert.Positive(t, aggregated, "and aggregates")
}

// A buffer that AppendKey returns as its own, rather than dst extended, is
// never handed back to it to write into.
func TestCorrelatorAppendKeyDoesNotWriteIntoItsOwnBuffer(t *testing.T) {
	own := append(make([]byte, 0, 64), "pod/R/fixed"...)
	st := dedupStage()
	st.Key = nil
	st.AppendKey = func(dst []byte, e ev) []byte {
		if e.Msg == "fixed" {
			return own
		}
		return appendKey(dst, e)
	}
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: st})
	for range 3 {
		assert.Equal(t, "pod/R/fixed", c.Correlate(ev{Obj: "pod", Reason: "R", Msg: "fixed"}).Key)
		assert.Equal(t, "other/R/a much longer message", c.Correlate(ev{Obj: "other", Reason: "R", Msg: "a much longer message"}).Key)
	}
	assert.Equal(t, "pod/R/fixed", string(own))
	assert.Equal(t, "pod/R/fixed", string(own[:cap(own)][:len(own)]))
	assert.Equal(t, make([]byte, cap(own)-len(own)), own[len(own):cap(own)], "nothing was written past it")
}

// A repeat merged into its record costs no allocation with AppendKey: the
// key is built in the correlator's buffer and only a new key is copied.
func TestCorrelatorAppendKeyMergesARepeatWithoutAllocating(t *testing.T) {
	st := mergeStage(1)
	st.Key = nil
	st.AppendKey = func(dst []byte, e ev) []byte { return append(append(append(dst, e.Obj...), '/'), e.Reason...) }
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: st})
	first := at("pod", 0)
	c.Correlate(first)
	repeat := at("pod", 1)
	var r fanout.Correlation[ev]
	if n := testing.AllocsPerRun(100, func() { r = c.Correlate(repeat) }); n != 0 {
		t.Errorf("a merged repeat allocated %v times, want 0", n)
	}
	assert.True(t, r.Merged)
	assert.Equal(t, "pod/R", r.Key)

	// A key longer than the correlator's first buffer: the grown buffer
	// is kept, so its repeats allocate nothing either.
	long := at(strings.Repeat("p", 300), 0)
	c.Correlate(long)
	if n := testing.AllocsPerRun(100, func() { r = c.Correlate(long) }); n != 0 {
		t.Errorf("a merged repeat of a 302-byte key allocated %v times, want 0", n)
	}
	assert.Equal(t, strings.Repeat("p", 300)+"/R", r.Key)
}

func TestCorrelatorObserveKeepsCountWithoutCountFunc(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage()})
	c.Correlate(ev{Msg: "m"})
	c.Correlate(ev{Msg: "m"})
	c.Observe(ev{Msg: "m", ID: "stored"})
	r := c.Correlate(ev{Msg: "m"})
	assert.Equal(t, 3, r.Count)
	assert.Equal(t, "stored", r.Value.ID)

	c.Observe(ev{Msg: "new", ID: "n"}) // never correlated: count 1
	assert.Equal(t, 2, c.Correlate(ev{Msg: "new"}).Count)
}

func TestCorrelatorSpam(t *testing.T) {
	clk := newManualClock()
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Spam: spamStage(3, 0.5), Clock: clk}) // a token every 2 s
	skips := func(n int, obj string) (s []bool) {
		for range n {
			s = append(s, c.Correlate(ev{Obj: obj}).Skip)
		}
		return s
	}
	assert.Equal(t, []bool{false, false, false, true, true}, skips(5, "a"), "burst of 3")
	assert.Equal(t, []bool{false, false, false, true}, skips(4, "b"), "buckets are per key")
	clk.Advance(time.Second)
	assert.Equal(t, []bool{true}, skips(1, "a"), "half a token")
	clk.Advance(time.Second)
	assert.Equal(t, []bool{false, true}, skips(2, "a"), "one token after 2 s")
	clk.Advance(time.Hour)
	assert.Equal(t, []bool{false, false, false, true}, skips(4, "a"), "refill stops at the burst")
}

func TestCorrelatorSpamDefaultsAndInfinity(t *testing.T) {
	clk := newManualClock()
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Spam: spamStage(0, 0), Clock: clk})
	for i := range fanout.DefaultSpamBurst {
		require.False(t, c.Correlate(ev{Obj: "a"}).Skip, "value %d is within the burst", i)
	}
	assert.True(t, c.Correlate(ev{Obj: "a"}).Skip)
	// client-go's rate is the float32 nearest 1/300: a token comes back
	// after 299.9999927 s, not 300 s.
	clk.Advance(299999992 * time.Microsecond)
	assert.True(t, c.Correlate(ev{Obj: "a"}).Skip)
	clk.Advance(time.Microsecond)
	assert.False(t, c.Correlate(ev{Obj: "a"}).Skip, "one token per 300 s (as float32)")

	inf := newCorrelator(t, fanout.CorrelatorConfig[ev]{Spam: spamStage(1, math.Inf(1))})
	for range 1000 {
		require.False(t, inf.Correlate(ev{Obj: "a"}).Skip)
	}
}

// A skipped value is still counted, as client-go does: the next one that
// passes carries the full count.
func TestCorrelatorSpamAfterDedup(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Spam: spamStage(2, 1e-9)})
	var got []fanout.Correlation[ev]
	for range 4 {
		got = append(got, c.Correlate(ev{Obj: "a", Msg: "m"}))
	}
	assert.Equal(t, []bool{false, false, true, true}, []bool{got[0].Skip, got[1].Skip, got[2].Skip, got[3].Skip})
	assert.Equal(t, 4, got[3].Count)
}

func TestCorrelatorCacheBound(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Spam: spamStage(1, 1e-9), CacheSize: 2})
	assert.Equal(t, 1, c.Correlate(ev{Obj: "a", Msg: "1"}).Count)
	assert.Equal(t, 1, c.Correlate(ev{Obj: "b", Msg: "2"}).Count)
	assert.True(t, c.Correlate(ev{Obj: "a", Msg: "1"}).Skip, "a's bucket is empty")
	assert.Equal(t, 1, c.Correlate(ev{Obj: "c", Msg: "3"}).Count) // evicts b, the least recently used
	r := c.Correlate(ev{Obj: "b", Msg: "2"})
	assert.Equal(t, 1, r.Count, "b was forgotten by the dedup cache")
	assert.False(t, r.Skip, "and by the spam cache: a fresh bucket")
	assert.Equal(t, 2, c.Correlate(ev{Obj: "c", Msg: "3"}).Count, "c was used recently and is kept")
	assert.Equal(t, 1, c.Correlate(ev{Obj: "a", Msg: "1"}).Count, "b's return evicted a")
}

func TestCorrelatorClone(t *testing.T) {
	type pev = *ev
	var clones int
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[pev]{
		Dedup: &fanout.DedupStage[pev]{
			Key: func(e pev) string { return e.Msg },
			Repeat: func(e, prev pev, n int) pev {
				e.ID, e.Count = prev.ID, n
				return e
			},
		},
		Clone: func(e pev) pev { clones++; c := *e; return &c },
	})
	require.NoError(t, err)
	in := &ev{Msg: "m", ID: "original"}
	r := c.Correlate(in)
	assert.NotSame(t, in, r.Value, "the input is cloned before use")
	in.ID = "changed by the caller"
	r.Value.ID = "changed by the sink"
	in2 := &ev{Msg: "m"}
	r2 := c.Correlate(in2)
	assert.Equal(t, "original", r2.Value.ID, "the remembered value is a clone")
	assert.Equal(t, 2, r2.Count)
	assert.Equal(t, ev{Msg: "m"}, *in2, "Repeat changed the correlator's copy, not the caller's value")
	assert.Equal(t, 4, clones, "input and memory, per Correlate")
}

// The windows measured with the system clock, in a synctest bubble: the
// 600 s aggregation interval and the 300 s token refill of the defaults.
func TestCorrelatorWindowsSystemClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{
			Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key},
			Spam:      &fanout.SpamStage[ev]{Key: func(e ev) string { return e.Obj + e.Msg }},
		})
		for i := range 9 {
			require.False(t, c.Correlate(ev{Obj: "p", Msg: fmt.Sprint(i)}).Aggregated)
			time.Sleep(600 * time.Second)
		}
		assert.True(t, c.Correlate(ev{Obj: "p", Msg: "x"}).Aggregated, "600 s apart is still together")
		time.Sleep(601 * time.Second)
		assert.False(t, c.Correlate(ev{Obj: "p", Msg: "y"}).Aggregated, "601 s apart is not")

		for range 25 {
			require.False(t, c.Correlate(ev{Obj: "q"}).Skip)
		}
		require.True(t, c.Correlate(ev{Obj: "q"}).Skip)
		time.Sleep(300 * time.Second)
		assert.False(t, c.Correlate(ev{Obj: "q"}).Skip)
		assert.True(t, c.Correlate(ev{Obj: "q"}).Skip)
	})
}

func TestCorrelatorConcurrent(t *testing.T) {
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Aggregate: aggStage(), Dedup: dedupStage(), Spam: spamStage(5, 1)})
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r := c.Correlate(ev{Obj: "a", Reason: "R", Msg: "same"})
				c.Observe(r.Value)
				counts[g] = max(counts[g], r.Count)
				_ = i
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 2001, c.Correlate(ev{Obj: "a", Reason: "R", Msg: "same"}).Count, "every call counted once")
}

// corrModel is a plain reference implementation of the correlator's rules,
// with unbounded maps: FuzzCorrelator compares the two.
type corrModel struct {
	max      int
	interval time.Duration
	groups   map[string]*modelGroup
	seen     map[string]int
	tokens   map[string]float64
	lastFill map[string]time.Time
	burst    float64
	rate     float64
}

type modelGroup struct {
	keys []string
	last time.Time
}

func (m *corrModel) correlate(e ev, now time.Time) (aggregated bool, count int, skip bool) {
	group, local := e.Obj+"/"+e.Reason, e.Msg
	g := m.groups[group]
	if g == nil || now.Sub(g.last) > m.interval {
		g = &modelGroup{}
		m.groups[group] = g
	}
	known := false
	for _, k := range g.keys {
		known = known || k == local
	}
	if !known {
		g.keys = append(g.keys, local)
	}
	g.last = now
	key := group + "/" + local
	if len(g.keys) >= m.max {
		g.keys = g.keys[1:]
		aggregated, key = true, group
	}
	m.seen[key]++
	count = m.seen[key]
	bucket := e.Obj
	tok, ok := m.tokens[bucket]
	if !ok {
		tok = m.burst
	} else {
		tok = min(m.burst, tok+now.Sub(m.lastFill[bucket]).Seconds()*m.rate)
	}
	m.lastFill[bucket] = now
	if tok >= 1 {
		tok--
	} else {
		skip = true
	}
	m.tokens[bucket] = tok
	return aggregated, count, skip
}

// FuzzCorrelator drives the correlator with arbitrary key parts and time
// steps and checks every decision against corrModel. The key and message
// functions join user strings, so the fuzzer also probes them with empty,
// long and non-UTF-8 parts.
func FuzzCorrelator(f *testing.F) {
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), "x", "y")
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 200, 201, 17, 18}, "", "\xff")
	f.Add([]byte{9, 19, 29, 39, 49, 59, 69, 79, 89, 99, 109, 119, 129, 139, 255, 9}, "pod", "Failed")
	f.Fuzz(func(t *testing.T, ops []byte, objPrefix, reason string) {
		clk := newManualClock()
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{
			Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key, MaxKeys: 4, Interval: 10 * time.Second},
			Dedup:     &fanout.DedupStage[ev]{Key: dedupStage().Key},
			Spam:      spamStage(3, 0.25),
			Clock:     clk,
			CacheSize: 1 << 20, // the model has no eviction
		})
		m := &corrModel{max: 4, interval: 10 * time.Second, groups: map[string]*modelGroup{},
			seen: map[string]int{}, tokens: map[string]float64{}, lastFill: map[string]time.Time{}, burst: 3, rate: 0.25}
		for i, op := range ops {
			clk.Advance([]time.Duration{0, time.Second, 4 * time.Second, 11 * time.Second}[op>>6])
			e := ev{
				Obj:    objPrefix + fmt.Sprint(op&1),
				Reason: reason + fmt.Sprint(op>>1&1),
				Msg:    fmt.Sprint("m", op>>2&15),
			}
			r := c.Correlate(e)
			agg, count, skip := m.correlate(e, clk.Now())
			require.Equal(t, agg, r.Aggregated, "op %d %+v", i, e)
			require.Equal(t, count, r.Count, "op %d %+v", i, e)
			require.Equal(t, skip, r.Skip, "op %d %+v", i, e)
		}
	})
}

// mark is a Merge function: the record's count and last time, in place.
func mark(rec ev, n int, last time.Time) ev {
	rec.Count, rec.Last = n, last
	return rec
}

// mergeStage merges by (Obj, Reason), writing the first writeFirst
// occurrences; an occurrence's time is its First field.
func mergeStage(writeFirst int) *fanout.DedupStage[ev] {
	return &fanout.DedupStage[ev]{
		Key:        func(e ev) string { return e.Obj + "/" + e.Reason },
		Merge:      mark,
		WriteFirst: writeFirst,
		Time:       func(e ev) time.Time { return e.First },
	}
}

// at is an occurrence of obj at minute m of the test clock's day.
func at(obj string, m int) ev {
	return ev{Obj: obj, Reason: "R", Msg: fmt.Sprint("m", m), First: newManualClock().Now().Add(time.Duration(m) * time.Minute)}
}

// lossLog is a LossCounter that records what it is told.
type lossLog struct {
	mu       sync.Mutex
	lost     map[fanout.DropReason]int
	failures int
}

func (l *lossLog) Lost(reason fanout.DropReason, n int, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(map[fanout.DropReason]int)
	}
	l.lost[reason] += n
}

func (l *lossLog) Failed(error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures++
}

func (l *lossLog) get() (map[fanout.DropReason]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.failures
}

// newMerging returns a merging correlator (WriteFirst 2) on clock, with
// cache size size, reporting to a new lossLog.
func newMerging(t *testing.T, size int, clock fanout.Clock) (*fanout.Correlator[ev], *lossLog) {
	t.Helper()
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(2), CacheSize: size, Clock: clock})
	l := &lossLog{}
	require.NoError(t, c.ReportLossesTo(l))
	return c, l
}

// From occurrence WriteFirst+1 of a key on, occurrences are folded into
// the remembered record and not written; the ones before are written as
// copies of the merged record.
func TestCorrelatorMergeFoldsAfterWriteFirst(t *testing.T) {
	for _, tc := range []struct {
		writeFirst int
		merged     []bool // per occurrence
	}{
		{0, []bool{false, false, false, false}},
		{1, []bool{false, true, true, true}},
		{2, []bool{false, false, true, true}},
		{3, []bool{false, false, false, true}},
	} {
		t.Run(fmt.Sprint("WriteFirst=", tc.writeFirst), func(t *testing.T) {
			c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(tc.writeFirst)})
			first := at("a", 0)
			for i, merged := range tc.merged {
				in := at("a", i)
				r := c.Correlate(in)
				assert.Equal(t, i+1, r.Count)
				assert.Equal(t, merged, r.Merged, "occurrence %d", i+1)
				switch {
				case merged:
					assert.Equal(t, in, r.Value, "a merged value is the input")
				case i == 0:
					assert.Equal(t, in, r.Value)
				default:
					// The merged record: the first occurrence, marked.
					want := first
					want.Count, want.Last = i+1, in.First
					assert.Equal(t, want, r.Value)
				}
			}
		})
	}
}

// Merged values skip the spam filter: they are not written now.
func TestCorrelatorMergedSkipSpam(t *testing.T) {
	one := &fanout.SpamStage[ev]{Key: func(ev) string { return "one bucket" }, Burst: 1, Rate: 1e-9}
	c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(1), Spam: one})
	assert.False(t, c.Correlate(at("a", 0)).Skip)
	for i := range 5 {
		r := c.Correlate(at("a", i+1))
		assert.True(t, r.Merged)
		assert.False(t, r.Skip)
	}
	assert.True(t, c.Correlate(at("b", 0)).Skip, "the merged values took no token")
}

// recordWrites is a Sweep.Write that records what it writes and stores
// the value with ID "stored".
type recordWrites struct {
	mu     sync.Mutex
	writes []ev
	fail   error
}

func (w *recordWrites) write(_ context.Context, e ev) (ev, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, e)
	e.ID = "stored"
	return e, w.fail
}

func (w *recordWrites) get() []ev {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// A refresh writes every open record with its count, and the record
// becomes what was stored; records that are not open are not written.
func TestWriteOpenRefreshesOpenRecords(t *testing.T) {
	c, losses := newMerging(t, 0, newManualClock())
	for _, e := range []ev{at("a", 0), at("a", 1), at("a", 2), at("b", 0), at("c", 0), at("c", 3)} {
		c.Correlate(e)
	}
	var w recordWrites
	require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write}))
	got := w.get()
	require.Len(t, got, 2, "a and c are open (two occurrences or more), b is not")
	assert.Equal(t, []int{3, 2}, []int{got[0].Count, got[1].Count})
	assert.Equal(t, at("a", 2).First, got[0].Last)

	// The stored record is remembered: the next write of a carries its ID.
	c.Correlate(at("a", 4))
	require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write}))
	got = w.get()
	require.Len(t, got, 4)
	assert.Equal(t, "c", got[2].Obj, "oldest first: a was seen last")
	assert.Equal(t, ev{Obj: "a", Reason: "R", Msg: "m0", First: at("a", 0).First, Count: 4, Last: at("a", 4).First, ID: "stored"}, got[3])
	lost, failures := losses.get()
	assert.Empty(t, lost)
	assert.Zero(t, failures)
}

// A finishing sweep writes the open records idle for longer than IdleFor
// and forgets them, forgets idle records that are not open, and leaves
// the others.
func TestWriteOpenFinishesIdleRecords(t *testing.T) {
	clock := newManualClock()
	c, _ := newMerging(t, 0, clock)
	for _, e := range []ev{at("old", 0), at("old", 1), at("single", 0), at("recent", 0), at("recent", 9), at("new single", 9)} {
		c.Correlate(e)
	}
	clock.Advance(10 * time.Minute)
	var w recordWrites
	finish := fanout.Sweep[ev]{Write: w.write, IdleFor: 5 * time.Minute, Finish: true}
	require.NoError(t, c.WriteOpen(t.Context(), finish))
	got := w.get()
	require.Len(t, got, 1)
	assert.Equal(t, "old", got[0].Obj)
	assert.Equal(t, 2, c.Stats().Records, "recent and new single are left")
	for _, obj := range []string{"old", "single"} {
		assert.Equal(t, 1, c.Correlate(at(obj, 11)).Count, "%s starts afresh", obj)
	}
	assert.Equal(t, 3, c.Correlate(at("recent", 11)).Count)
}

// A sweep of the unwritten records writes only those holding merged values
// not yet written, and finishing forgets them; a record whose count was
// written in full, or that a refresh wrote since, is left as it is.
func TestWriteOpenUnwrittenSkipsRecordsAlreadyWritten(t *testing.T) {
	c, losses := newMerging(t, 0, newManualClock())
	// a: merged occurrences 3 and 4; b: its two occurrences written, none
	// merged; c: merged, then refreshed; d: a single occurrence.
	for _, e := range []ev{at("a", 0), at("a", 1), at("a", 2), at("a", 3), at("b", 0), at("b", 1),
		at("c", 0), at("c", 1), at("c", 2), at("d", 0)} {
		c.Correlate(e)
	}
	var refresh recordWrites
	require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: refresh.write}))
	require.Len(t, refresh.get(), 3, "a, b and c are open")
	c.Correlate(at("a", 4))

	var w recordWrites
	last := fanout.Sweep[ev]{Write: w.write, Finish: true, Unwritten: true}
	require.NoError(t, c.WriteOpen(t.Context(), last))
	got := w.get()
	require.Len(t, got, 1, "only a holds an occurrence not yet written")
	assert.Equal(t, "a", got[0].Obj)
	assert.Equal(t, 5, got[0].Count)
	assert.Equal(t, 3, c.Stats().Records, "a is finished; b, c and d are left")
	assert.Equal(t, 1, c.Correlate(at("a", 5)).Count, "a starts afresh")
	lost, failures := losses.get()
	assert.Empty(t, lost)
	assert.Zero(t, failures)
}

// Occurrences merged while a record is being written stay to be written:
// the write holds no lock, the record stays open even when finishing, and
// a refresh re-marks the stored record with the later count.
func TestWriteOpenKeepsOccurrencesMergedDuringWrite(t *testing.T) {
	for _, finish := range []bool{false, true} {
		t.Run(fmt.Sprint("finish=", finish), func(t *testing.T) {
			clock := newManualClock()
			c, losses := newMerging(t, 0, clock)
			c.Correlate(at("a", 0))
			c.Correlate(at("a", 1))
			c.Correlate(at("a", 2))
			clock.Advance(time.Hour)
			var w recordWrites
			during := func(ctx context.Context, e ev) (ev, error) {
				assert.True(t, c.Correlate(at("a", 3)).Merged)
				return w.write(ctx, e)
			}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: during, IdleFor: time.Minute, Finish: finish}))
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write}))
			got := w.get()
			require.Len(t, got, 2)
			assert.Equal(t, 3, got[0].Count)
			assert.Equal(t, 4, got[1].Count, "the occurrence merged during the first write")
			assert.Equal(t, at("a", 3).First, got[1].Last)
			lost, failures := losses.get()
			assert.Empty(t, lost)
			assert.Zero(t, failures)
		})
	}
}

// Merged values that will never be written are reported lost, with the
// reason, and every failed sweep write is reported.
func TestCorrelatorReportsLosses(t *testing.T) {
	transient, final := errors.New("transient"), errors.New("final")
	retryable := func(err error) bool { return err == transient }
	for _, tc := range []struct {
		name         string
		act          func(t *testing.T, c *fanout.Correlator[ev], clock *manualClock)
		wantLost     map[fanout.DropReason]int
		wantFailures int
	}{
		{"evicted", func(t *testing.T, c *fanout.Correlator[ev], _ *manualClock) {
			c.Correlate(at("b", 0)) // size 1: evicts a, 2 merged
		}, map[fanout.DropReason]int{fanout.DropFull: 2}, 0},
		{"finish rejected", func(t *testing.T, c *fanout.Correlator[ev], clock *manualClock) {
			clock.Advance(time.Hour)
			w := recordWrites{fail: final}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write, IdleFor: time.Minute, Finish: true, Retryable: retryable}))
			assert.Zero(t, c.Stats().Records)
		}, map[fanout.DropReason]int{fanout.DropRejected: 2}, 1},
		{"finish retryable", func(t *testing.T, c *fanout.Correlator[ev], clock *manualClock) {
			clock.Advance(time.Hour)
			w := recordWrites{fail: transient}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write, IdleFor: time.Minute, Finish: true, Retryable: retryable}))
			assert.Equal(t, 1, c.Stats().Records, "kept for the next sweep")
		}, nil, 1},
		{"refresh failed", func(t *testing.T, c *fanout.Correlator[ev], _ *manualClock) {
			w := recordWrites{fail: final}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write}))
			c.Purge() // the failed refresh left them pending
		}, map[fanout.DropReason]int{fanout.DropShutdown: 2}, 1},
		{"write panicked", func(t *testing.T, c *fanout.Correlator[ev], clock *manualClock) {
			clock.Advance(time.Hour)
			panics := func(context.Context, ev) (ev, error) { panic("bug") }
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: panics, IdleFor: time.Minute, Finish: true, Retryable: func(error) bool { return true }}))
		}, map[fanout.DropReason]int{fanout.DropRejected: 2}, 1},
		{"purged", func(t *testing.T, c *fanout.Correlator[ev], _ *manualClock) {
			c.Purge()
			assert.Equal(t, 1, c.Correlate(at("a", 9)).Count, "a starts afresh")
		}, map[fanout.DropReason]int{fanout.DropShutdown: 2}, 0},
		{"evicted during a successful write", func(t *testing.T, c *fanout.Correlator[ev], _ *manualClock) {
			evict := func(ctx context.Context, e ev) (ev, error) {
				c.Correlate(at("b", 0))
				return e, nil
			}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: evict}))
		}, nil, 0},
		{"evicted during a failed write", func(t *testing.T, c *fanout.Correlator[ev], _ *manualClock) {
			evict := func(ctx context.Context, e ev) (ev, error) {
				c.Correlate(at("b", 0))
				return e, final
			}
			require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: evict}))
		}, map[fanout.DropReason]int{fanout.DropFull: 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newManualClock()
			c, losses := newMerging(t, 1, clock)
			for i := range 4 { // a: created, written as repeat 2, then 2 merged
				c.Correlate(at("a", i))
			}
			tc.act(t, c, clock)
			lost, failures := losses.get()
			if tc.wantLost == nil {
				assert.Empty(t, lost)
			} else {
				assert.Equal(t, tc.wantLost, lost)
			}
			assert.Equal(t, tc.wantFailures, failures)
		})
	}
}

// Only open records count as evicted open records.
func TestCorrelatorStatsCountsEvictedOpenRecords(t *testing.T) {
	c, _ := newMerging(t, 1, newManualClock())
	c.Correlate(at("a", 0))
	c.Correlate(at("b", 0)) // evicts a, not open
	c.Correlate(at("b", 1))
	c.Correlate(at("c", 0)) // evicts b, open
	assert.Equal(t, fanout.CorrelatorStats{Records: 1, EvictedOpen: 1}, c.Stats())
}

// A merging correlator reports to one LossCounter only; one that does not
// merge ignores any number.
func TestReportLossesToOnce(t *testing.T) {
	c, _ := newMerging(t, 0, nil)
	err := c.ReportLossesTo(&lossLog{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "give each sink its own")
	plain := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage()})
	require.NoError(t, plain.ReportLossesTo(&lossLog{}))
	require.NoError(t, plain.ReportLossesTo(&lossLog{}))
	assert.Error(t, plain.ReportLossesTo(nil))
}

func TestWriteOpenErrors(t *testing.T) {
	write := func(_ context.Context, e ev) (ev, error) { return e, nil }
	merging, _ := newMerging(t, 0, nil)
	for name, tc := range map[string]struct {
		c *fanout.Correlator[ev]
		s fanout.Sweep[ev]
	}{
		"no dedup stage":    {newCorrelator(t, fanout.CorrelatorConfig[ev]{}), fanout.Sweep[ev]{Write: write}},
		"not merging":       {newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage()}), fanout.Sweep[ev]{Write: write}},
		"nil write":         {merging, fanout.Sweep[ev]{}},
		"negative idle for": {merging, fanout.Sweep[ev]{Write: write, IdleFor: -time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.c.WriteOpen(t.Context(), tc.s)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "fanout: "), err.Error())
		})
	}
}

// A sweep whose context ends stops before the next write.
func TestWriteOpenStopsWhenContextEnds(t *testing.T) {
	c, _ := newMerging(t, 0, nil)
	for _, obj := range []string{"a", "b", "c"} {
		c.Correlate(at(obj, 0))
		c.Correlate(at(obj, 1))
	}
	ctx, cancel := context.WithCancel(t.Context())
	writes := 0
	cancelling := func(_ context.Context, e ev) (ev, error) {
		writes++
		cancel()
		return e, nil
	}
	assert.ErrorIs(t, c.WriteOpen(ctx, fanout.Sweep[ev]{Write: cancelling}), context.Canceled)
	assert.Equal(t, 1, writes)
}

// A finishing sweep without IdleFor selects every open record and leaves
// the others alone, as Sweep's doc says (only with IdleFor are records
// that are not open forgotten): a record seen once stays, and its next
// occurrence is a repeat. It was forgotten, and written again as new.
func TestWriteOpenFinishWithoutIdleForKeepsRecordsThatAreNotOpen(t *testing.T) {
	c, _ := newMerging(t, 0, newManualClock())
	c.Correlate(at("a", 0))
	var w recordWrites
	require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: w.write, Finish: true}))
	assert.Empty(t, w.get())
	assert.Equal(t, 2, c.Correlate(at("a", 1)).Count)
}

// A record open by its count alone (no merged value to write) that is
// evicted while WriteOpen writes it is reused for the key that evicted
// it; the write's outcome is not applied to that successor. The stored
// copy of the evicted key became the successor's record: its next
// occurrence was written as the evicted key's.
func TestWriteOpenLeavesTheSuccessorOfARecordEvictedDuringTheWriteAlone(t *testing.T) {
	c, _ := newMerging(t, 1, newManualClock()) // CacheSize 1, WriteFirst 2
	c.Correlate(at("a", 0))
	require.False(t, c.Correlate(at("a", 1)).Merged) // written: a is open
	write := func(_ context.Context, e ev) (ev, error) {
		require.Equal(t, "b", c.Correlate(at("b", 2)).Value.Obj) // evicts a
		e.ID = "stored-a"
		return e, nil
	}
	require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: write}))
	r := c.Correlate(at("b", 3))
	assert.Equal(t, 2, r.Count)
	assert.Equal(t, "b", r.Value.Obj)
	assert.Empty(t, r.Value.ID, "b's record holds nothing of a's write")
}

// panickyClock is a clock whose Now panics while armed.
type panickyClock struct {
	manualClock
	armed bool
}

func (c *panickyClock) Now() time.Time {
	if c.armed {
		panic("clock")
	}
	return c.manualClock.Now()
}

// A clock or Clone that panics while the dedup stage records a value (the
// runner drops that value, counted) leaves no half-made record behind: the
// next value of the key is not a repeat of a zero value, which would lose
// what the sink stored (its ID) for every later repeat.
func TestCorrelatorPanicWhileRecordingRemembersNothingHalfMade(t *testing.T) {
	t.Run("clock in Observe", func(t *testing.T) {
		clk := &panickyClock{manualClock: *newManualClock()}
		st := dedupStage()
		st.Count = func(e ev) int { return e.Count }
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: st, Clock: clk})
		clk.armed = true
		assert.Panics(t, func() { c.Observe(ev{Msg: "m", Count: 1, ID: "stored"}) })
		clk.armed = false
		r := c.Correlate(ev{Msg: "m", Count: 1})
		if r.Count == 2 {
			assert.Equal(t, "stored", r.Value.ID, "a repeat of a record that was never kept")
		} else {
			assert.Equal(t, 1, r.Count)
		}
	})
	t.Run("clone of a first occurrence", func(t *testing.T) {
		clones, failAt := 0, 0
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Clone: func(e ev) ev {
			clones++
			if clones == failAt {
				panic("clone")
			}
			return e
		}})
		failAt = 2 // the copy the record keeps
		assert.Panics(t, func() { c.Correlate(ev{Msg: "m", ID: "first"}) })
		failAt = 0
		r := c.Correlate(ev{Msg: "m", ID: "second"})
		if r.Count == 2 {
			assert.Equal(t, "first", r.Value.ID, "a repeat of a record that was never kept")
		} else {
			assert.Equal(t, 1, r.Count)
		}
	})
}
