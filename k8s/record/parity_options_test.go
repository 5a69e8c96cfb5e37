package record_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	clientrecord "k8s.io/client-go/tools/record"
)

// Custom functions for CorrelatorOptions. They are pure, as client-go
// expects, and group differently from the defaults.

// parityKeyByObject groups by object (namespace and name) alone, whatever
// the source, type or reason; the local key is the reason and message.
func parityKeyByObject(e *v1.Event) (string, string) {
	return e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name, e.Reason + "|" + e.Message
}

// parityKeyByReason groups by reason and type across objects; the local
// key is the object, field path and message.
func parityKeyByReason(e *v1.Event) (string, string) {
	return e.Reason + "/" + e.Type, e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name + e.InvolvedObject.FieldPath + "|" + e.Message
}

func parityMessageCustom(e *v1.Event) string {
	return fmt.Sprintf("[%s, %s x] %s", e.Reason, e.InvolvedObject.FieldPath, e.Message)
}

func paritySpamBySource(e *v1.Event) string { return e.Source.Component + "/" + e.Source.Host }

func paritySpamByNamespaceReason(e *v1.Event) string {
	return e.InvolvedObject.Namespace + "/" + e.Reason
}

// parityOptionsConfig returns the random-sequence configuration for opts:
// the effective key function, threshold, window and cache size for the
// model, and clock steps around opts' window and token time.
func parityOptionsConfig(opts record.CorrelatorOptions) parityRandConfig {
	cfg := parityRandConfig{
		opts:      opts,
		keyFunc:   opts.KeyFunc,
		maxEvents: opts.MaxEvents,
		interval:  time.Duration(opts.MaxIntervalInSeconds) * time.Second,
		cacheSize: opts.LRUCacheSize,
	}
	if cfg.keyFunc == nil {
		cfg.keyFunc = clientrecord.EventAggregatorByReasonFunc
	}
	if cfg.maxEvents == 0 {
		cfg.maxEvents = parityDefaultMaxEvents
	}
	if cfg.interval == 0 {
		cfg.interval = parityDefaultIntervalSec * time.Second
	}
	qps := opts.QPS
	if qps == 0 {
		qps = parityDefaultQPS
	}
	// A token takes 1/qps seconds at the float64 of the float32 rate, as
	// both limiters get it.
	token := time.Duration(float64(time.Second) / float64(qps))
	ivl := cfg.interval
	cfg.steps = []time.Duration{0, 10 * time.Millisecond, time.Second, token / 2,
		token - time.Microsecond, token, token + time.Microsecond,
		ivl, ivl + 1, 2*ivl + token, time.Hour}
	cfg.profiles = [][]int{
		{50, 20, 20, 3, 1, 1, 1, 1, 1, 1, 1},       // bursts
		{25, 15, 20, 10, 5, 5, 5, 5, 5, 3, 2},      // mixed
		{10, 5, 15, 15, 8, 8, 8, 10, 10, 6, 5},     // slow
		{5, 5, 10, 10, 10, 10, 10, 15, 15, 5, 5},   // boundaries
		{30, 10, 10, 0, 10, 10, 10, 10, 10, 0, 0},  // bursts and boundaries
		{40, 40, 10, 2, 2, 2, 2, 0, 0, 1, 1},       // within the window
		{20, 0, 0, 0, 20, 20, 20, 0, 0, 20, 0},     // token boundaries only
		{20, 20, 0, 0, 0, 0, 0, 30, 30, 0, 0},      // window boundaries only
		{70, 10, 5, 5, 2, 2, 2, 1, 1, 1, 1},        // mostly simultaneous
		{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},          // uniform
		{100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},        // one instant
		{10, 10, 10, 10, 10, 10, 10, 10, 10, 0, 0}, // no long gaps
	}
	return cfg
}

// parityRandomOptions draws CorrelatorOptions with every field custom or
// zero (the default), with small caches, thresholds and windows.
func parityRandomOptions(rng *rand.Rand) record.CorrelatorOptions {
	pick := func(n int) int { return rng.IntN(n) }
	keyFuncs := []record.EventAggregatorKeyFunc{nil, parityKeyByObject, parityKeyByReason, clientrecord.EventAggregatorByReasonFunc}
	msgFuncs := []record.EventAggregatorMessageFunc{nil, parityMessageCustom}
	spamFuncs := []record.EventSpamKeyFunc{nil, paritySpamBySource, paritySpamByNamespaceReason, parityClientSpamKey}
	return record.CorrelatorOptions{
		LRUCacheSize:         []int{0, 1, 2, 3, 5, 16}[pick(6)],
		BurstSize:            []int{0, 1, 2, 3, 7}[pick(5)],
		QPS:                  []float32{0, 1, 0.1, 1. / 60., 4.5, 1e-4, 1e6}[pick(7)],
		KeyFunc:              keyFuncs[pick(len(keyFuncs))],
		MessageFunc:          msgFuncs[pick(len(msgFuncs))],
		MaxEvents:            []int{0, 1, 2, 3, 5}[pick(5)],
		MaxIntervalInSeconds: []int{0, 1, 10, 120}[pick(4)],
		SpamKeyFunc:          spamFuncs[pick(len(spamFuncs))],
	}
}

// TestParityCorrelatorOptions: client-go's and our
// NewEventCorrelatorWithOptions with custom KeyFunc, MessageFunc,
// SpamKeyFunc, LRUCacheSize, MaxEvents, MaxIntervalInSeconds, BurstSize
// and QPS, on random sequences (strict and tolerant, as
// TestParityRandomStrict and TestParityRandomTolerant) with clock steps
// around each configuration's window and token time. A few fixed
// configurations come first, then random ones.
func TestParityCorrelatorOptions(t *testing.T) {
	fixed := []record.CorrelatorOptions{
		{KeyFunc: parityKeyByObject, MessageFunc: parityMessageCustom, SpamKeyFunc: paritySpamBySource,
			MaxEvents: 3, MaxIntervalInSeconds: 10, BurstSize: 2, QPS: 0.5, LRUCacheSize: 4},
		{KeyFunc: parityKeyByReason, MaxEvents: 2, MaxIntervalInSeconds: 1, BurstSize: 1, QPS: 1, LRUCacheSize: 2},
		{MessageFunc: parityMessageCustom, MaxEvents: 1, BurstSize: 3, QPS: 1. / 60., LRUCacheSize: 3},
		{SpamKeyFunc: paritySpamByNamespaceReason, MaxEvents: 5, MaxIntervalInSeconds: 120, BurstSize: 7, QPS: 4.5},
		{QPS: 1e-4, BurstSize: 1, MaxIntervalInSeconds: 1},
	}
	rng := rand.New(rand.NewPCG(*parityFlagSeed, 0x0b7105))
	nConfigs := paritySeqCount(12)
	perConfig := 3 // strict and tolerant sequences each
	var total parityResult
	popDivergent := 0
	for i := range len(fixed) + nConfigs {
		var opts record.CorrelatorOptions
		if i < len(fixed) {
			opts = fixed[i]
		} else {
			opts = parityRandomOptions(rng)
		}
		cfg := parityOptionsConfig(opts)
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			gen := func(rng *rand.Rand, avoid bool) paritySequence {
				return parityGenerate(rng, cfg, max(1, *parityFlagLen*3/4), avoid)
			}
			for _, strict := range []bool{true, false} {
				res, pd := parityRun(t, perConfig, 0x0b7105<<8+uint64(i)<<1+map[bool]uint64{true: 0, false: 1}[strict], strict, gen, parityReplay, false)
				total.add(res)
				popDivergent += pd
			}
			if t.Failed() {
				t.Logf("options: %v", cfg)
			}
		})
	}
	t.Logf("total: %d compared (%d aggregated of which %d counted repeats, %d skipped, %d repeats, %d pop-sensitive that agreed); %d pop-divergent sequences",
		total.compared, total.aggregated, total.aggregatedRepeats, total.skipped, total.repeats, total.sensitiveAgreed, popDivergent)
	for what, count := range map[string]int{"aggregated": total.aggregated, "aggregated and counted": total.aggregatedRepeats,
		"skipped": total.skipped, "repeated": total.repeats, "pop-sensitive and compared": total.sensitiveAgreed} {
		if count == 0 {
			t.Errorf("no event was %s: the generator does not exercise that stage", what)
		}
	}
}
