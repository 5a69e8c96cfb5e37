package record_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	clientrecord "k8s.io/client-go/tools/record"
)

// parityDefaultPairs returns the ways to get client-go's defaults on both
// sides: NewEventCorrelator(clock); NewEventCorrelatorWithOptions with zero
// options; and zero options for ours against client-go's defaults spelled
// out (its constants, key functions and the restated getSpamKey), which
// checks that our defaults are client-go's values and not merely the same
// zero.
func parityDefaultPairs() []parityNamedPair {
	explicit := record.CorrelatorOptions{
		LRUCacheSize:         parityDefaultCacheSize,
		BurstSize:            parityDefaultBurst,
		QPS:                  parityDefaultQPS,
		KeyFunc:              clientrecord.EventAggregatorByReasonFunc,
		MessageFunc:          clientrecord.EventAggregatorByReasonMessageFunc,
		MaxEvents:            parityDefaultMaxEvents,
		MaxIntervalInSeconds: parityDefaultIntervalSec,
		SpamKeyFunc:          parityClientSpamKey,
	}
	return []parityNamedPair{
		{"NewEventCorrelator", func() *parityPair { return parityNewPlainPair(parityStart) }, true},
		{"NewEventCorrelatorWithOptions(zero)", func() *parityPair { return parityNewPair(parityStart, record.CorrelatorOptions{}) }, true},
		{"client-go explicit defaults vs ours zero", func() *parityPair {
			return parityNewSplitPair(parityStart, explicit, record.CorrelatorOptions{})
		}, false},
		{"client-go zero vs ours explicit defaults", func() *parityPair {
			return parityNewSplitPair(parityStart, record.CorrelatorOptions{}, explicit)
		}, false},
		{"ours with client-go's functions (non-nil)", func() *parityPair { return parityNewPair(parityStart, explicit) }, false},
		{"client-go zero vs ours negative (defaulted)", func() *parityPair {
			return parityNewSplitPair(parityStart, record.CorrelatorOptions{}, parityNegativeOptions())
		}, false},
	}
}

type parityNamedPair struct {
	name       string
	newPair    func() *parityPair
	cacheCheck bool // run the (slow) check of the default cache size
}

// parityNegativeOptions are options that ours, unlike client-go, documents
// as meaning the defaults.
func parityNegativeOptions() record.CorrelatorOptions {
	return record.CorrelatorOptions{LRUCacheSize: -1, BurstSize: -1, QPS: -1, MaxEvents: -1, MaxIntervalInSeconds: -1}
}

// TestParityDefaults checks client-go's default numbers at their
// boundaries, for every way of asking for the defaults: the spam bucket of
// 25 refilled at the float32 rate 1./300. (a token takes 299.9999927 s: it
// is not back after 299.999992 s and is after 299.999993 s), aggregation at
// the 10th distinct message within 600 s, and the LRU of 4096 keys.
func TestParityDefaults(t *testing.T) {
	obj := parityPodRef("ns", "pod", "spec.containers{app}")
	for _, np := range parityDefaultPairs() {
		newPair := np.newPair
		t.Run(np.name, func(t *testing.T) {
			t.Run("spam bucket", func(t *testing.T) {
				p := newPair()
				send := func(what, msg string) parityOutcome {
					o := p.correlate(parityNewEvent(p.clock.Now(), obj, v1.EventTypeNormal, "Reason", msg))
					parityMust(t, what, o)
					return o
				}
				for i := range parityDefaultBurst { // empties the bucket; 8 messages: no aggregation
					if o := send("event "+strconv.Itoa(i), "m"+strconv.Itoa(i%8)); o.skipped() {
						t.Fatalf("event %d skipped", i)
					}
				}
				if o := send("past the burst", "m0"); !o.skipped() {
					t.Errorf("event past the burst was not skipped")
				}
				p.advance(299_999_992 * time.Microsecond)
				if o := send("after 299.999992 s", "m1"); !o.skipped() {
					t.Errorf("a token was back after 299.999992 s")
				}
				p.advance(time.Microsecond)
				if o := send("after 299.999993 s", "m2"); o.skipped() {
					t.Errorf("no token was back after 299.999993 s")
				}
				if o := send("token used", "m3"); !o.skipped() {
					t.Errorf("the refilled token was used twice")
				}
			})
			t.Run("aggregation threshold and window", func(t *testing.T) {
				// Every message is new: client-go's arbitrary pop cannot
				// change a decision.
				p := newPair()
				for i := range 2*parityDefaultMaxEvents + 2 {
					step := time.Second
					if i == parityDefaultMaxEvents+1 {
						step = parityDefaultIntervalSec * time.Second // still the same window
					}
					if i == parityDefaultMaxEvents+3 {
						step = parityDefaultIntervalSec*time.Second + 1 // a new window
					}
					p.advance(step)
					o := p.correlate(parityNewEvent(p.clock.Now(), parityPodRef("ns", "pod", "spec.containers{c"+strconv.Itoa(i%3)+"}"),
						v1.EventTypeWarning, "Failed", "message "+strconv.Itoa(i)))
					parityMust(t, "event "+strconv.Itoa(i), o)
				}
			})
			t.Run("cache of 4096 keys", func(t *testing.T) {
				if !np.cacheCheck {
					t.Skip("the same default size as another case; skipped to save time")
				}
				for _, n := range []int{parityDefaultCacheSize, parityDefaultCacheSize + 1} {
					p := newPair()
					first := parityNewEvent(p.clock.Now(), parityPodRef("ns", "first", ""), v1.EventTypeNormal, "R", "m")
					parityMust(t, "first", p.correlate(first))
					for i := 1; i < n; i++ {
						o := p.correlate(parityNewEvent(p.clock.Now(), parityPodRef("ns", "pod-"+strconv.Itoa(i), ""), v1.EventTypeNormal, "R", "m"))
						if d := o.diff(); len(d) > 0 {
							t.Fatalf("%d keys, event %d: %v", n, i, d)
						}
					}
					o := p.correlate(first)
					parityMust(t, fmt.Sprintf("first again after %d keys", n), o)
					if want := map[bool]int32{true: 2, false: 1}[n == parityDefaultCacheSize]; o.ours.Event == nil || o.ours.Event.Count != want {
						t.Errorf("first again after %d keys: %s, want count %d", n, parityDescribe(o.ours.Event), want)
					}
				}
			})
		})
	}
}

// TestParityDefaultsRandom replays random strict sequences through every
// way of asking for the defaults.
func TestParityDefaultsRandom(t *testing.T) {
	for i, np := range parityDefaultPairs() {
		t.Run(np.name, func(t *testing.T) {
			cfg := parityDefaultConfig(parityDefaultCacheSize)
			replay := func(seq paritySequence, tolerate bool) parityResult {
				return parityReplayWith(seq, tolerate, np.newPair())
			}
			gen := func(rng *rand.Rand, avoid bool) paritySequence {
				return parityGenerate(rng, cfg, *parityFlagLen, avoid)
			}
			parityRun(t, paritySeqCount(4), 0xdefa17+uint64(i), true, gen, replay, true)
		})
	}
}
