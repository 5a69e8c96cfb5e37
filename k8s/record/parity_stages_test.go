package record_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	"k8s.io/apimachinery/pkg/api/equality"
	clientrecord "k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// The standalone stages: client-go's NewEventAggregator and
// NewEventSourceObjectSpamFilter against ours, on random sequences.

// parityAggregatorConfig draws the arguments of NewEventAggregator: a
// cache size, key and message functions (client-go's, ours, ours as nil,
// custom), a threshold of at least 1 and a window of at least 1 s (client-go
// takes 0 literally and we take it as the default; see
// parity_known_test.go).
func parityAggregatorConfig(rng *rand.Rand) (cfg parityRandConfig, desc string, newAgg func(clock *clocktesting.FakePassiveClock) (*clientrecord.EventAggregator, *record.EventAggregator)) {
	size := []int{1, 2, 3, 8, parityDefaultCacheSize}[rng.IntN(5)]
	maxEvents := []int{1, 2, 3, 5, parityDefaultMaxEvents}[rng.IntN(5)]
	ivlSec := []int{1, 10, 120, parityDefaultIntervalSec}[rng.IntN(4)]
	type keyChoice struct {
		name         string
		client, ours record.EventAggregatorKeyFunc
	}
	keys := []keyChoice{
		{"client-go's vs ours", clientrecord.EventAggregatorByReasonFunc, record.EventAggregatorByReasonFunc},
		{"client-go's vs ours nil", clientrecord.EventAggregatorByReasonFunc, nil},
		{"client-go's on both", clientrecord.EventAggregatorByReasonFunc, clientrecord.EventAggregatorByReasonFunc},
		{"by object", parityKeyByObject, parityKeyByObject},
		{"by reason", parityKeyByReason, parityKeyByReason},
	}
	type msgChoice struct {
		name         string
		client, ours record.EventAggregatorMessageFunc
	}
	msgs := []msgChoice{
		{"client-go's vs ours", clientrecord.EventAggregatorByReasonMessageFunc, record.EventAggregatorByReasonMessageFunc},
		{"client-go's vs ours nil", clientrecord.EventAggregatorByReasonMessageFunc, nil},
		{"custom", parityMessageCustom, parityMessageCustom},
	}
	k, m := keys[rng.IntN(len(keys))], msgs[rng.IntN(len(msgs))]
	cfg = parityOptionsConfig(record.CorrelatorOptions{
		LRUCacheSize: size, KeyFunc: k.client, MaxEvents: maxEvents, MaxIntervalInSeconds: ivlSec,
	})
	desc = fmt.Sprintf("NewEventAggregator(%d, key %s, message %s, %d, %d)", size, k.name, m.name, maxEvents, ivlSec)
	newAgg = func(clock *clocktesting.FakePassiveClock) (*clientrecord.EventAggregator, *record.EventAggregator) {
		return clientrecord.NewEventAggregator(size, k.client, m.client, maxEvents, ivlSec, clock),
			record.NewEventAggregator(size, k.ours, m.ours, maxEvents, ivlSec, clock)
	}
	return cfg, desc, newAgg
}

// parityReplayAggregator feeds seq to both aggregators and compares, for
// each event: the returned event (equality.Semantic, field by field),
// whether it is the input itself (no aggregation) or a new one, and the
// key; and that neither changed its input. With tolerate, a different
// aggregation decision on a pop-sensitive event ends the replay as
// pop-divergent.
func parityReplayAggregator(seq paritySequence, tolerate bool,
	newAgg func(*clocktesting.FakePassiveClock) (*clientrecord.EventAggregator, *record.EventAggregator)) parityResult {
	res := parityResult{popDivergent: -1, mismatchAt: -1}
	clock := clocktesting.NewFakePassiveClock(parityStart)
	client, ours := newAgg(clock)
	model := parityNewAggModel(seq.cfg)
	for i, st := range seq.steps {
		clock.SetTime(clock.Now().Add(st.advance))
		now := clock.Now()
		e := st.ev.event(now)
		sensitive, predicted := model.predict(&e, now)
		model.record(&e, now)

		ce, oe := e, e
		cr, ck := client.EventAggregate(&ce)
		or, ok := ours.EventAggregate(&oe)
		clientAgg, oursAgg := cr != &ce, or != &oe
		if oursAgg != predicted {
			res.mismatchAt = i
			res.mismatch = []string{fmt.Sprintf("aggregated: ours %v, the model (oldest key dropped) predicts %v", oursAgg, predicted)}
			return res
		}
		var d []string
		if clientAgg != oursAgg {
			d = append(d, fmt.Sprintf("aggregated (returned a new event): client-go %v, ours %v", clientAgg, oursAgg))
		}
		if ck != ok {
			d = append(d, fmt.Sprintf("key: client-go %q, ours %q", ck, ok))
		}
		d = append(d, parityEventDiff(cr, or)...)
		if !equality.Semantic.DeepEqual(ce, e) || !equality.Semantic.DeepEqual(oe, e) {
			d = append(d, fmt.Sprintf("input changed: client-go %s, ours %s", parityDescribe(&ce), parityDescribe(&oe)))
		}
		if len(d) > 0 && tolerate && sensitive && clientAgg != oursAgg {
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
	}
	return res
}

// TestParityEventAggregator: client-go's EventAggregator.EventAggregate
// and ours, on random sequences (strict and tolerant) for random
// arguments of NewEventAggregator.
func TestParityEventAggregator(t *testing.T) {
	rng := rand.New(rand.NewPCG(*parityFlagSeed, 0xa66))
	var total parityResult
	popDivergent := 0
	for i := range paritySeqCount(20) {
		cfg, desc, newAgg := parityAggregatorConfig(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			replay := func(seq paritySequence, tolerate bool) parityResult {
				return parityReplayAggregator(seq, tolerate, newAgg)
			}
			gen := func(rng *rand.Rand, avoid bool) paritySequence {
				return parityGenerate(rng, cfg, *parityFlagLen, avoid)
			}
			for _, strict := range []bool{true, false} {
				salt := 0xa66<<8 + uint64(i)<<1
				if !strict {
					salt++
				}
				res, pd := parityRun(t, 3, salt, strict, gen, replay, false)
				total.add(res)
				popDivergent += pd
			}
			if t.Failed() {
				t.Logf("aggregator: %s", desc)
			}
		})
	}
	t.Logf("total: %d compared (%d aggregated, %d pop-sensitive that agreed); %d pop-divergent sequences",
		total.compared, total.aggregated, total.sensitiveAgreed, popDivergent)
	if total.aggregated == 0 || total.sensitiveAgreed == 0 {
		t.Errorf("the generator does not exercise aggregation (%d) or pop-sensitive events (%d)", total.aggregated, total.sensitiveAgreed)
	}
}

// TestParitySpamFilter: client-go's EventSourceObjectSpamFilter.Filter and
// ours, on random events and clock steps around the token time, for
// random arguments of NewEventSourceObjectSpamFilter (positive: client-go
// takes 0 literally and we take it as the default; see
// parity_known_test.go).
func TestParitySpamFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(*parityFlagSeed, 0x5ba3))
	type keyChoice struct {
		name         string
		client, ours record.EventSpamKeyFunc
	}
	keys := []keyChoice{
		{"getSpamKey vs ours nil", parityClientSpamKey, nil},
		{"getSpamKey on both", parityClientSpamKey, parityClientSpamKey},
		{"by source", paritySpamBySource, paritySpamBySource},
		{"by namespace and reason", paritySpamByNamespaceReason, paritySpamByNamespaceReason},
	}
	skipped, allowed := 0, 0
	for i := range paritySeqCount(40) {
		size := []int{1, 2, 5, parityDefaultCacheSize}[rng.IntN(4)]
		burst := []int{1, 2, 5, parityDefaultBurst}[rng.IntN(4)]
		qps := []float32{parityDefaultQPS, 1, 0.25, 3.5, 1e-3, 1e6}[rng.IntN(6)]
		k := keys[rng.IntN(len(keys))]
		desc := fmt.Sprintf("NewEventSourceObjectSpamFilter(%d, %d, %v, clock, %s)", size, burst, qps, k.name)

		clock := clocktesting.NewFakePassiveClock(parityStart)
		client := clientrecord.NewEventSourceObjectSpamFilter(size, burst, qps, clock, k.client)
		ours := record.NewEventSourceObjectSpamFilter(size, burst, qps, clock, k.ours)
		token := time.Duration(float64(time.Second) / float64(qps))
		steps := []time.Duration{0, time.Millisecond, token / 3, token - time.Microsecond, token - 1, token, token + 1, 2 * token, time.Hour}
		weights := [][]int{{50, 20, 10, 5, 5, 5, 5, 2, 1}, {10, 10, 20, 15, 10, 10, 10, 10, 5}}[rng.IntN(2)]
		narrow := rng.IntN(2) == 0
		var log []string
		for j := range 1 + rng.IntN(2**parityFlagLen) {
			clock.SetTime(clock.Now().Add(steps[parityWeighted(rng, weights)]))
			s := paritySpec{obj: rng.IntN(len(parityAlphaObjects)), path: rng.IntN(len(parityAlphaPaths)),
				typ: rng.IntN(len(parityAlphaTypes)), reason: rng.IntN(len(parityAlphaReasons)),
				msg: rng.IntN(len(parityAlphaMsgs)), src: rng.IntN(len(parityAlphaSources)), count: 1}
			if narrow { // few keys, so that buckets empty
				s.obj, s.typ, s.src = 0, 0, 0
			}
			e := s.event(clock.Now())
			ce, oe := e, e
			c, o := client.Filter(&ce), ours.Filter(&oe)
			log = append(log, fmt.Sprintf("  %3d %v %v: client-go %v, ours %v", j, clock.Now().Sub(parityStart), s, c, o))
			if c != o {
				t.Errorf("%s, sequence %d: Filter differs at event %d; the last events (clock since start, event, skip):\n%s",
					desc, i, j, strings.Join(log[max(0, len(log)-40):], "\n"))
				break
			}
			if !equality.Semantic.DeepEqual(ce, e) || !equality.Semantic.DeepEqual(oe, e) {
				t.Errorf("%s: Filter changed its input", desc)
				break
			}
			if c {
				skipped++
			} else {
				allowed++
			}
		}
	}
	t.Logf("%d events skipped, %d allowed by both", skipped, allowed)
	if skipped == 0 || allowed == 0 {
		t.Errorf("the generator does not exercise the filter: %d skipped, %d allowed", skipped, allowed)
	}
}
