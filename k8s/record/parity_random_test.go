package record_test

import (
	"container/list"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	clientrecord "k8s.io/client-go/tools/record"
)

// Randomized differential test: random event sequences over a small
// alphabet, so that aggregation, counting, spam filtering and cache
// eviction all happen often, are fed to client-go's EventCorrelator and to
// ours on one fake clock, and every result is compared. After each event
// that is not skipped, a successful write is simulated as recordToSink does
// it (the server's copy, with a new resource version, is given to
// UpdateState), except for a few writes that fail for good, after which
// recordToSink updates nothing.
//
// The one known difference: once a group has MaxEvents distinct messages in
// its window, client-go drops an arbitrary message from its set
// (sets.PopAny, map order) and ours the oldest. From then on, a message
// seen earlier in the window may still be in one set and not in the other,
// so the two may decide differently whether to aggregate it. Such an event
// is "pop-sensitive"; parityAggModel tells which events are, and predicts
// every aggregation decision of ours, which must match it always.
//
//   - TestParityRandomStrict generates sequences without pop-sensitive
//     events and demands equality throughout.
//   - TestParityRandomTolerant generates any sequence. Both sides'
//     aggregation decisions are observed directly (parityNewPair's probes),
//     so the first difference of a sequence is tolerated only if it is a
//     different aggregation decision on a pop-sensitive event; the rest of
//     that sequence is then not compared (the states have diverged), and
//     the sequence is counted as pop-divergent. Any other difference fails.
//
// Flags: -parity.scale, -parity.len, -parity.seed. A failure prints the
// seed, and the sequence shrunk to fewer events that still fail.

var (
	parityFlagScale = flag.Int("parity.scale", 100, "number of random sequences of the randomized parity tests, in percent of the default (-short: a quarter)")
	parityFlagLen   = flag.Int("parity.len", 200, "longest random sequence of the parity tests, in events")
	parityFlagSeed  = flag.Uint64("parity.seed", 1, "seed of the randomized parity tests")
)

// paritySeqCount is the number of random sequences (or configurations) a
// test runs: n times -parity.scale/100, at least 1; a quarter of it with
// -short.
func paritySeqCount(n int) int {
	n = n * *parityFlagScale / 100
	if testing.Short() {
		n /= 4
	}
	return max(1, n)
}

// The alphabet. EventAggregatorByReasonFunc groups by source, object (not
// its field path), type, reason and reporting controller; the dedup key
// has the field path and the message but not the reporting controller;
// the spam key is source, object and type.
var (
	parityAlphaObjects = [][2]string{{"ns1", "a"}, {"ns1", "b"}, {"ns2", "a"}}
	parityAlphaPaths   = []string{"spec.containers{app}", ""}
	parityAlphaTypes   = []string{v1.EventTypeNormal, v1.EventTypeWarning}
	parityAlphaReasons = []string{"Pulled", "BackOff", "Failed"}
	parityAlphaSources = []v1.EventSource{{Component: "kubelet", Host: "node-1"}, {Component: "scheduler"}}
	parityAlphaCtrls   = []string{"", "ctrl"}
	parityAlphaMsgs    = func() []string {
		m := make([]string, 12)
		for i := range m {
			m[i] = "message " + strconv.Itoa(i)
		}
		return m
	}()
)

// Clock steps: 0 and 1 s keep groups in their aggregation window and empty
// the spam buckets, 30 s lets buckets refill slowly, 299.999992 s and
// 299.999993 s are just too short and just long enough for one token at
// client-go's rate (the float32 1./300.: a token takes 299.9999927 s), 300
// and 301 s refill one token, 600 s is the last gap still within an
// aggregation window, 601 s ends windows, 3600 s refills 12 tokens. Each
// sequence draws them with one of the weight profiles.
var (
	parityDefaultSteps = []time.Duration{0, time.Second, 30 * time.Second,
		299_999_992 * time.Microsecond, 299_999_993 * time.Microsecond, 300 * time.Second, 301 * time.Second,
		600 * time.Second, 601 * time.Second, time.Hour}
	parityDefaultProfiles = [][]int{
		{60, 30, 6, 1, 1, 1, 1, 1, 1, 1},  // bursts: spam filter and aggregation
		{35, 30, 15, 3, 3, 3, 3, 4, 4, 1}, // mixed
		{15, 20, 30, 8, 8, 8, 5, 5, 5, 2}, // slow: refills and window ends
	}
)

// parityRandConfig is what random sequences are generated for and replayed
// with.
type parityRandConfig struct {
	// opts is given to NewEventCorrelatorWithOptions on both sides
	// (Clock and MessageFunc wrapped by parityNewPair).
	opts record.CorrelatorOptions
	// plain: build both sides with NewEventCorrelator(clock) instead (the
	// options must then be client-go's defaults); there are no probes.
	plain bool
	// What the model needs: the effective key function, MaxEvents,
	// interval and cache size.
	keyFunc   clientrecord.EventAggregatorKeyFunc
	maxEvents int
	interval  time.Duration
	cacheSize int
	// Clock steps and their weight profiles.
	steps    []time.Duration
	profiles [][]int
}

// parityDefaultConfig is client-go's defaults with a cache of cacheSize.
func parityDefaultConfig(cacheSize int) parityRandConfig {
	return parityRandConfig{
		opts:      record.CorrelatorOptions{LRUCacheSize: cacheSize},
		keyFunc:   clientrecord.EventAggregatorByReasonFunc,
		maxEvents: parityDefaultMaxEvents,
		interval:  parityDefaultIntervalSec * time.Second,
		cacheSize: cacheSize,
		steps:     parityDefaultSteps,
		profiles:  parityDefaultProfiles,
	}
}

func (c parityRandConfig) String() string {
	o := c.opts
	return fmt.Sprintf("plain=%v cache=%d burst=%d qps=%v maxEvents=%d interval=%v custom key/message/spam funcs=%v/%v/%v",
		c.plain, c.cacheSize, o.BurstSize, o.QPS, c.maxEvents, c.interval, o.KeyFunc != nil, o.MessageFunc != nil, o.SpamKeyFunc != nil)
}

// paritySpec is one event of a sequence, as indexes into the alphabet.
type paritySpec struct {
	obj, path, typ, reason, msg, src, ctrl int
	count                                  int32 // the input count: 1 as the recorder makes, rarely 0
}

type parityStep struct {
	advance   time.Duration // clock move before the event
	ev        paritySpec
	writeFail bool // the write fails for good: no UpdateState
}

type paritySequence struct {
	cfg   parityRandConfig
	steps []parityStep
}

func (s paritySpec) event(now time.Time) v1.Event {
	o := parityAlphaObjects[s.obj]
	e := parityNewEvent(now, parityPodRef(o[0], o[1], parityAlphaPaths[s.path]), parityAlphaTypes[s.typ], parityAlphaReasons[s.reason], parityAlphaMsgs[s.msg])
	e.Source = parityAlphaSources[s.src]
	e.ReportingController = parityAlphaCtrls[s.ctrl]
	e.Count = s.count
	return e
}

func (s paritySpec) String() string {
	o := parityAlphaObjects[s.obj]
	str := fmt.Sprintf("%s/%s[%s] %s %s %q src=%s", o[0], o[1], parityAlphaPaths[s.path], parityAlphaTypes[s.typ],
		parityAlphaReasons[s.reason], parityAlphaMsgs[s.msg], parityAlphaSources[s.src].Component)
	if s.ctrl != 0 {
		str += " ctrl=" + parityAlphaCtrls[s.ctrl]
	}
	if s.count != 1 {
		str += fmt.Sprintf(" count=%d", s.count)
	}
	return str
}

func (s paritySequence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v, %d events:\n", s.cfg, len(s.steps))
	for i, st := range s.steps {
		fail := ""
		if st.writeFail {
			fail = " (write fails)"
		}
		fmt.Fprintf(&b, "  %3d +%-12v %v%s\n", i, st.advance, st.ev, fail)
	}
	return b.String()
}

// parityAggModel follows the aggregation windows independently of both
// implementations: an LRU of groups, as large as the correlators' caches,
// each with the messages seen in its current window and the set of local
// keys as ours keeps it (the oldest dropped at the threshold), so it
// predicts every decision of ours. client-go decides the same except on a
// pop-sensitive event: one whose window has reached MaxEvents distinct
// local keys (so client-go has dropped an arbitrary one, sets.PopAny) and
// whose local key was seen earlier in the window (so client-go may or may
// not still have it). Any key seen in such a window may have been dropped:
// each new key after the first drop brings the set back to MaxEvents and
// makes it drop one again. With MaxEvents 1 the set is emptied every time,
// so nothing is arbitrary.
type parityAggModel struct {
	cfg   parityRandConfig
	order *list.List // of group keys, most recent first
	elems map[string]*list.Element
	wins  map[string]*parityAggWindow
}

type parityAggWindow struct {
	last time.Time
	seen map[string]bool // every local key of the window
	keys []string        // ours' set, in insertion order
}

func (w *parityAggWindow) has(local string) bool {
	for _, k := range w.keys {
		if k == local {
			return true
		}
	}
	return false
}

func parityNewAggModel(cfg parityRandConfig) *parityAggModel {
	if cfg.cacheSize == 0 {
		cfg.cacheSize = parityDefaultCacheSize
	}
	return &parityAggModel{cfg: cfg, order: list.New(), elems: map[string]*list.Element{}, wins: map[string]*parityAggWindow{}}
}

// current returns the group's window as it stands at now, nil if it has
// none (never seen, evicted or expired). It does not change the model.
func (m *parityAggModel) current(group string, now time.Time) *parityAggWindow {
	w := m.wins[group]
	if w == nil || now.Sub(w.last) > m.cfg.interval {
		return nil
	}
	return w
}

// predict tells whether e at now is pop-sensitive, and whether ours
// aggregates it (so does client-go unless it is pop-sensitive).
func (m *parityAggModel) predict(e *v1.Event, now time.Time) (sensitive, aggregated bool) {
	group, local := m.cfg.keyFunc(e)
	w := m.current(group, now)
	if w == nil {
		return false, m.cfg.maxEvents <= 1
	}
	n := len(w.keys)
	if !w.has(local) {
		n++
	}
	return m.cfg.maxEvents > 1 && len(w.seen) >= m.cfg.maxEvents && w.seen[local], n >= m.cfg.maxEvents
}

// record adds e at now, moving its group to the front of the LRU.
func (m *parityAggModel) record(e *v1.Event, now time.Time) {
	group, local := m.cfg.keyFunc(e)
	w := m.current(group, now)
	if w == nil {
		w = &parityAggWindow{seen: map[string]bool{}}
		m.wins[group] = w
	}
	w.seen[local] = true
	if !w.has(local) {
		w.keys = append(w.keys, local)
	}
	if len(w.keys) >= m.cfg.maxEvents {
		w.keys = w.keys[1:]
	}
	w.last = now
	if el, ok := m.elems[group]; ok {
		m.order.MoveToFront(el)
		return
	}
	m.elems[group] = m.order.PushFront(group)
	if m.order.Len() > m.cfg.cacheSize {
		old := m.order.Remove(m.order.Back()).(string)
		delete(m.elems, old)
		delete(m.wins, old)
	}
}

// parityGenerate returns a random sequence for cfg, of at most maxLen
// events; with avoidPopSensitive, one without pop-sensitive events. Each
// sequence uses a random part of the alphabet (so that few groups and spam
// buckets fill up fast) and a random clock profile; each event repeats a
// recent one (counted), takes a recent one's group with any message and
// field path (aggregated), or is drawn afresh.
func parityGenerate(rng *rand.Rand, cfg parityRandConfig, maxLen int, avoidPopSensitive bool) paritySequence {
	seq := paritySequence{cfg: cfg}
	n := 1 + rng.IntN(maxLen)
	profile := cfg.profiles[rng.IntN(len(cfg.profiles))]
	subset := func(n int) []int { // a single value half the time
		if rng.IntN(2) == 0 {
			return rng.Perm(n)[:1]
		}
		return rng.Perm(n)[:1+rng.IntN(n)]
	}
	objs, typs, reasons, srcs := subset(len(parityAlphaObjects)), subset(len(parityAlphaTypes)), subset(len(parityAlphaReasons)), subset(len(parityAlphaSources))
	pick := func(from []int) int { return from[rng.IntN(len(from))] }
	// Weights of: repeat a recent event, a recent event's group, afresh.
	mix := [][]int{{3, 4, 3}, {2, 7, 1}, {5, 3, 2}}[rng.IntN(3)]
	// The longest step ends every aggregation window.
	longest := cfg.interval + time.Second

	model := parityNewAggModel(cfg)
	now := parityStart
	var recent []paritySpec
	candidate := func() parityStep {
		st := parityStep{advance: cfg.steps[parityWeighted(rng, profile)], writeFail: rng.IntN(20) == 0}
		r := parityWeighted(rng, mix)
		switch {
		case r == 0 && len(recent) > 0:
			st.ev = recent[rng.IntN(len(recent))]
		case r == 1 && len(recent) > 0:
			st.ev = recent[rng.IntN(len(recent))]
			st.ev.msg = rng.IntN(len(parityAlphaMsgs))
			st.ev.path = rng.IntN(len(parityAlphaPaths))
			if rng.IntN(2) == 0 { // prefer a message new to the window
				e := st.ev.event(now)
				group, _ := cfg.keyFunc(&e)
				if w := model.current(group, now); w != nil {
					for _, m := range rng.Perm(len(parityAlphaMsgs)) {
						e.Message = parityAlphaMsgs[m]
						if _, local := cfg.keyFunc(&e); !w.seen[local] {
							st.ev.msg = m
							break
						}
					}
				}
			}
		default:
			st.ev = paritySpec{
				obj: pick(objs), path: rng.IntN(len(parityAlphaPaths)), typ: pick(typs),
				reason: pick(reasons), msg: rng.IntN(len(parityAlphaMsgs)), src: pick(srcs),
			}
			if rng.IntN(10) == 0 {
				st.ev.ctrl = 1
			}
		}
		st.ev.count = 1
		if rng.IntN(50) == 0 {
			st.ev.count = 0
		}
		return st
	}

	for range n {
		st := candidate()
		if avoidPopSensitive {
			for try := 0; ; try++ {
				e := st.ev.event(now.Add(st.advance))
				if s, _ := model.predict(&e, now.Add(st.advance)); !s {
					break
				}
				if try == 20 {
					st.advance = longest
					break
				}
				st = candidate()
			}
		}
		now = now.Add(st.advance)
		e := st.ev.event(now)
		model.record(&e, now)
		seq.steps = append(seq.steps, st)
		recent = append(recent, st.ev)
		if len(recent) > 8 {
			recent = recent[1:]
		}
	}
	return seq
}

func parityWeighted(rng *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	r := rng.IntN(total)
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	panic("unreachable")
}

// parityResult is what replaying one sequence found.
type parityResult struct {
	compared     int      // events whose outcomes were compared
	popDivergent int      // index of the pop-sensitive event where the two diverged, or -1
	mismatchAt   int      // index of the first other difference, or -1
	mismatch     []string // its description

	aggregated, aggregatedRepeats, skipped, repeats, sensitiveAgreed int
}

func (r *parityResult) add(o parityResult) {
	r.compared += o.compared
	r.aggregated += o.aggregated
	r.aggregatedRepeats += o.aggregatedRepeats
	r.skipped += o.skipped
	r.repeats += o.repeats
	r.sensitiveAgreed += o.sensitiveAgreed
}

// parityReplay feeds seq to both correlators and compares them step by
// step. With tolerate, a different aggregation decision on a pop-sensitive
// event ends the replay as pop-divergent instead of being a mismatch.
func parityReplay(seq paritySequence, tolerate bool) parityResult {
	if seq.cfg.plain {
		return parityReplayWith(seq, tolerate, parityNewPlainPair(parityStart))
	}
	return parityReplayWith(seq, tolerate, parityNewPair(parityStart, seq.cfg.opts))
}

// parityReplayWith is parityReplay on a given, fresh pair.
func parityReplayWith(seq paritySequence, tolerate bool, p *parityPair) parityResult {
	res := parityResult{popDivergent: -1, mismatchAt: -1}
	model := parityNewAggModel(seq.cfg)
	rv := 0
	for i, st := range seq.steps {
		p.advance(st.advance)
		now := p.clock.Now()
		e := st.ev.event(now)
		sensitive, predicted := model.predict(&e, now)
		model.record(&e, now)

		o := p.correlate(e)
		if o.probed && o.oursAggregated != predicted { // ours is deterministic
			res.mismatchAt = i
			res.mismatch = []string{fmt.Sprintf("aggregated: ours %v, the model (oldest key dropped) predicts %v", o.oursAggregated, predicted)}
			return res
		}
		d := o.diff()
		if len(d) > 0 && tolerate && sensitive && o.probed && o.clientAggregated != o.oursAggregated {
			res.popDivergent = i
			return res
		}
		if len(d) > 0 {
			res.mismatchAt, res.mismatch = i, d
			return res
		}
		res.compared++
		if sensitive {
			res.sensitiveAgreed++
		}
		if predicted {
			res.aggregated++
		}
		if o.skipped() {
			res.skipped++
			continue
		}
		if o.ours.Event.Count > 1 {
			res.repeats++
			if predicted {
				res.aggregatedRepeats++
			}
		}
		if !st.writeFail {
			rv++
			p.written(o, strconv.Itoa(rv))
		}
	}
	return res
}

// parityShrink removes steps from a sequence whose replay has a mismatch
// (not a pop divergence), one at a time, as long as a mismatch remains.
// Removing steps can make events pop-sensitive, and client-go random, so a
// candidate must fail three replays out of three.
func parityShrink(seq paritySequence, replay func(paritySequence, bool) parityResult) paritySequence {
	fails := func(s paritySequence) bool {
		for range 3 {
			if replay(s, true).mismatchAt < 0 {
				return false
			}
		}
		return true
	}
	// Cut what follows the first mismatch.
	if at := replay(seq, true).mismatchAt; at >= 0 {
		seq.steps = seq.steps[:at+1]
	}
	for changed := true; changed; {
		changed = false
		for i := len(seq.steps) - 1; i >= 0; i-- {
			c := paritySequence{cfg: seq.cfg}
			c.steps = append(append(c.steps, seq.steps[:i]...), seq.steps[i+1:]...)
			if len(c.steps) > 0 && fails(c) {
				seq, changed = c, true
			}
		}
	}
	if at := replay(seq, true).mismatchAt; at >= 0 {
		seq.steps = seq.steps[:at+1]
	}
	return seq
}

// parityRun generates n sequences with gen and replays them with replay,
// strict (avoiding pop-sensitive events, no tolerance) or tolerant; it
// reports mismatches (shrunk) and returns the totals and the number of
// pop-divergent sequences.
func parityRun(t *testing.T, n int, salt uint64, avoidPopSensitive bool,
	gen func(rng *rand.Rand, avoidPopSensitive bool) paritySequence,
	replay func(paritySequence, bool) parityResult, verbose bool) (total parityResult, popDivergent int) {
	t.Helper()
	events, mismatches := 0, 0
	for i := range n {
		seed := *parityFlagSeed<<32 + uint64(i)
		rng := rand.New(rand.NewPCG(seed, salt))
		seq := gen(rng, avoidPopSensitive)
		res := replay(seq, !avoidPopSensitive)
		events += len(seq.steps)
		total.add(res)
		if res.popDivergent >= 0 {
			popDivergent++
		}
		if res.mismatchAt >= 0 {
			mismatches++
			if mismatches <= 3 && (verbose || mismatches <= 1) {
				small := parityShrink(seq, replay)
				r := replay(small, true)
				t.Errorf("sequence %d (seed %d, salt %#x): mismatch at event %d: %s\nshrunk to %vmismatch at event %d:\n  %s",
					i, seed, salt, res.mismatchAt, strings.Join(res.mismatch, "; "), small, r.mismatchAt, strings.Join(r.mismatch, "\n  "))
			}
		}
	}
	if verbose || mismatches > 0 {
		t.Logf("%d sequences, %d events, %d compared (%d aggregated of which %d counted repeats, %d skipped, %d repeats, %d pop-sensitive that agreed); "+
			"%d pop-divergent sequences, %d mismatches",
			n, events, total.compared, total.aggregated, total.aggregatedRepeats, total.skipped, total.repeats, total.sensitiveAgreed,
			popDivergent, mismatches)
	}
	if avoidPopSensitive && popDivergent > 0 {
		t.Errorf("%d sequences diverged on pop-sensitive events the generator should have avoided", popDivergent)
	}
	return total, popDivergent
}

func parityRandomCorrelator(t *testing.T, avoidPopSensitive bool, salt uint64) {
	sizes := []int{parityDefaultCacheSize, 0, 8, 8, 3, 1} // 0: the default, 4096
	gen := func(rng *rand.Rand, avoid bool) paritySequence {
		return parityGenerate(rng, parityDefaultConfig(sizes[rng.IntN(len(sizes))]), *parityFlagLen, avoid)
	}
	total, _ := parityRun(t, paritySeqCount(40), salt, avoidPopSensitive, gen, parityReplay, true)
	for what, count := range map[string]int{"aggregated": total.aggregated, "aggregated and counted": total.aggregatedRepeats,
		"skipped": total.skipped, "repeated": total.repeats} {
		if count == 0 {
			t.Errorf("no event was %s: the generator does not exercise that stage", what)
		}
	}
	if !avoidPopSensitive && total.sensitiveAgreed == 0 {
		t.Errorf("no pop-sensitive event was compared: the tolerant generator does not reach them")
	}
}

// TestParityRandomStrict: sequences without pop-sensitive events; the two
// correlators must agree on every event.
func TestParityRandomStrict(t *testing.T) { parityRandomCorrelator(t, true, 0x9e3779b97f4a7c15) }

// TestParityRandomTolerant: any sequence; a sequence may diverge only by
// the arbitrary pop of client-go's aggregator.
func TestParityRandomTolerant(t *testing.T) { parityRandomCorrelator(t, false, 0x85ebca6b) }
