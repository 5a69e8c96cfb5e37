package fanout_test

import (
	"fmt"
	"math"
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
		"negative cache":      {CacheSize: -1},
		"aggregate no key":    {Aggregate: &fanout.AggregateStage[ev]{}},
		"aggregate negative":  {Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key, MaxKeys: -1}},
		"aggregate interval":  {Aggregate: &fanout.AggregateStage[ev]{Key: aggStage().Key, Interval: -time.Second}},
		"dedup no key":        {Dedup: &fanout.DedupStage[ev]{}},
		"spam no key":         {Spam: &fanout.SpamStage[ev]{}},
		"spam negative burst": {Spam: &fanout.SpamStage[ev]{Key: key, Burst: -1}},
		"spam negative rate":  {Spam: &fanout.SpamStage[ev]{Key: key, Rate: -1}},
		"spam NaN rate":       {Spam: &fanout.SpamStage[ev]{Key: key, Rate: math.NaN()}},
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
	r2 := c.Correlate(&ev{Msg: "m"})
	assert.Equal(t, "original", r2.Value.ID, "the remembered value is a clone")
	assert.Equal(t, 2, r2.Count)
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
