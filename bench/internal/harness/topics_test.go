package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fanout-go/fanout"
)

// Every topic system delivers each value to every watcher of its topic,
// and to no other, and leaves no goroutine once torn down: watermill's
// Close waits for every message to be acked, cskr's Shutdown follows the
// Pubs before it, kelindar's sentinel reaches every topic. Each reader
// finds each producer's values in that producer's order, but in
// watermill's asynchronous mode, which may reorder them.
func TestTopicSystemsDeliverEachValueToItsTopicOnlyInOrder(t *testing.T) {
	for _, producers := range []int{1, 4} {
		for _, topics := range []int{1, 3} {
			for _, s := range TopicSystems(topics) {
				const events = 604 // a multiple of the producers, not of the topics
				smp, err := measure(variant{sys: s}, topics*WatchersPerTopic, producers, events)
				if err != nil {
					t.Fatalf("%s: %v", s.Label(), err)
				}
				name := fmt.Sprintf("%s, %d topics, %d producers", s.Label(), topics, producers)
				if smp.expected != events*WatchersPerTopic || smp.delivered != smp.expected || !smp.settled {
					t.Errorf("%s: delivered %d, expected %d (want %d), settled %v", name, smp.delivered, smp.expected,
						events*WatchersPerTopic, smp.settled)
				}
				if smp.broken != 0 && !s.reorders() {
					t.Errorf("%s: %d values out of order", name, smp.broken)
				}
			}
		}
	}
}

// The readers' check counts a value that is not the next of its source
// on the topic: skipped, repeated or swapped, or no source's value.
func TestTopicOrderCountsEachValueOutOfItsSourcesOrder(t *testing.T) {
	stamp := func(s, k int64) int64 { return s<<32 | k&topicSeqMask }
	for _, tc := range []struct {
		name   string
		stamps []int64
		broken int64
	}{
		{"two sources, interleaved, each in order", []int64{stamp(0, 1), stamp(3, 2), stamp(0, 4), stamp(3, 5), stamp(0, 7)}, 0},
		{"past the mask", []int64{stamp(1, topicSeqMask-1), stamp(1, topicSeqMask+2), stamp(1, topicSeqMask+5)}, 0},
		{"skipped", []int64{stamp(0, 0), stamp(0, 6), stamp(0, 9)}, 1},
		{"repeated", []int64{stamp(0, 0), stamp(0, 3), stamp(0, 3), stamp(0, 6)}, 1},
		{"swapped", []int64{stamp(2, 0), stamp(2, 6), stamp(2, 3), stamp(2, 9)}, 3},
		{"no source's", []int64{-1, stamp(topicSources, 0)}, 2},
	} {
		o := topicOrder{topics: 3}
		for _, s := range tc.stamps {
			o.see(s)
		}
		if o.broken != tc.broken {
			t.Errorf("%s: %d out of order, want %d", tc.name, o.broken, tc.broken)
		}
	}
}

// Each source publishes over every topic in turn from a topic of its own,
// its values numbered from 0.
func TestTopicSeqSourcesStartOnTopicsOfTheirOwn(t *testing.T) {
	q := &topicSeq{topics: 4}
	var got []string
	for range 2 {
		q.each(5, func(topic, s, k int) { got = append(got, fmt.Sprintf("%d:%d/%d", s, k, topic)) })
	}
	// 4 topics spread over 16 sources: source 1 starts on topic 0 too.
	if want := "0:0/0 0:1/1 0:2/2 0:3/3 0:4/0 1:0/0 1:1/1 1:2/2 1:3/3 1:4/0"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
	q = &topicSeq{topics: 1000}
	if s, topic := q.source(); s != 0 || topic != 0 {
		t.Errorf("first source %d on %d", s, topic)
	}
	if s, topic := q.source(); s != 1 || topic != 1000/topicSources {
		t.Errorf("second source %d on %d", s, topic)
	}
}

func TestTopicSystemsLabelsAndValidation(t *testing.T) {
	for s, want := range map[System]string{
		FanoutTopics(10):              "fanout Topics",
		FanoutTopicsByHand(10):        "fanout Broadcaster per topic, by hand",
		KelindarTopics(10):            "kelindar by type q50000",
		Cskr(10):                      "cskr/pubsub q100",
		Watermill(StrategyAck, 10):    "watermill GoChannel ack q100",
		Watermill(StrategyAsync, 100): "watermill GoChannel async q100",
	} {
		if got := s.Label(); got != want {
			t.Errorf("%+v: label %q, want %q", s, got, want)
		}
	}
	bad := []System{FanoutTopics(0), Watermill(StrategyWait, 1), Cskr(2), FanoutTopics(2), FanoutTopicsByHand(2),
		{Name: SystemKelindar, Strategy: StrategyWait, API: APITopics, Queue: DefaultQueue, Topics: 1},
		{Name: SystemTeivah, Strategy: StrategyWait, API: APITopics, Queue: DefaultQueue, Topics: 1},
		{Name: SystemCskr, Strategy: StrategyWait, API: APITopicsByHand, Queue: DefaultQueue, Topics: 1}}
	for _, s := range bad {
		if _, err := s.start(3, 0, nil); err == nil {
			t.Errorf("%+v started with 3 watchers", s)
		}
	}
	if _, err := FanoutTopics(1).start(10, 0, &recorder{}); err == nil {
		t.Error("the topics group measured latency")
	}
	if _, err := topicsGroup(Config{}, &Results{}, 1, maxTopicProducers+1); err == nil {
		t.Errorf("topics group with %d producers", maxTopicProducers+1)
	}
}

// The topics targets want, at each topic count and producers, fanout
// Topics at least as fast as one Broadcaster per topic by hand
// (RatioVsByHand; at one topic, where both are one broadcaster, parity
// within the noise) and ahead of the fastest topic peer that keeps the
// order (RatioVsFanout, peer over fanout): not watermill async, nor a peer
// whose readers found a value out of order.
func TestTopicsTargets(t *testing.T) {
	topic := func(s System, producers int, vsFanout, vsByHand float64, broken int64) Case {
		c := newCase(KindTopics, s)
		c.Topics, c.Watchers, c.Producers = s.Topics, s.Topics*WatchersPerTopic, producers
		c.RatioVsFanout, c.RatioVsByHand, c.OutOfOrder = ptr(vsFanout), ptr(vsByHand), ptr(broken)
		return c
	}
	cases := []Case{
		topic(FanoutTopics(1), 1, 1, 0.9, 0), topic(FanoutTopicsByHand(1), 1, 1.1, 1, 0), topic(KelindarTopics(1), 1, 0.5, 0.45, 0),
		topic(FanoutTopics(1), 4, 1, 0.8, 0),
		topic(Cskr(1), 1, 0.1, 0.1, 0), topic(Watermill(StrategyAsync, 1), 1, 3, 3, 0),
		topic(FanoutTopics(1000), 4, 1, 0.9, 0), topic(KelindarTopics(1000), 4, 1.25, 1.1, 0), topic(Cskr(1000), 4, 2, 2, 7),
	}
	want := map[string]string{
		"topics, 1 topic × 10 watchers, 1 producer: fanout Topics / one Broadcaster per topic by hand":      Pass + " 0.90×",
		"topics, 1 topic × 10 watchers, 4 producers: fanout Topics / one Broadcaster per topic by hand":     Fail + " 0.80×",
		"topics, 1 topic × 10 watchers, 1 producer: fanout Topics / fastest topic peer in order":            Pass + " 2.00× (kelindar by type q50000)",
		"topics, 1000 topics × 10 watchers, 4 producers: fanout Topics / one Broadcaster per topic by hand": Fail + " 0.90×",
		"topics, 1000 topics × 10 watchers, 4 producers: fanout Topics / fastest topic peer in order":       Fail + " 0.80× (kelindar by type q50000)",
		"topics, 10 topics × 10 watchers, 1 producer: fanout Topics / fastest topic peer in order":          NA + " -",
	}
	for _, tg := range topicsTargets(cases) {
		if w, ok := want[tg.Name]; ok && tg.Status+" "+tg.Measured != w {
			t.Errorf("%s: got %q, want %q", tg.Name, tg.Status+" "+tg.Measured, w)
		}
		delete(want, tg.Name)
	}
	if len(want) > 0 {
		t.Errorf("no targets %q", want)
	}
	if n := len(topicsTargets(nil)); n != 2*len(TargetTopics)*len(TargetTopicProducers) {
		t.Errorf("%d topics targets", n)
	}
}

// A topics table does not rank a system that reorders: watermill async,
// or one whose readers found values out of order, which it shows.
func TestTopicsReportShowsReorderingUnranked(t *testing.T) {
	c := func(s System, broken int64) Case {
		c := newCase(KindTopics, s)
		c.Topics, c.Producers, c.DeliveredPerSec, c.RatioVsFanout, c.RatioVsByHand, c.OutOfOrder = 3, 4, ptr(1e6), ptr(2.5), ptr(2.0), ptr(broken)
		return c
	}
	res := &Results{Cases: []Case{c(FanoutTopics(3), 0), c(Watermill(StrategyAsync, 3), 12), c(Cskr(3), 0)}}
	var b strings.Builder
	if err := reportTopicGroups(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== topics: 3 topics × 10 watchers, 4 producers", "REORDERED (12 values)", "not ranked", "2.50×", "in order"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "not ranked") != 2 {
		t.Errorf("want watermill's two ratios not ranked:\n%s", out)
	}
}

// A calibrated run of the topics group adds at least TopicsQueueShare
// times what its topics' queues hold; from TopicsFixedFrom topics, the
// short run too is past it; a fixed number of events stays.
func TestTopicsConfigRunsPastWhatTheQueuesHold(t *testing.T) {
	def := DefaultConfig()
	for _, topics := range []int{1, 10, 100} {
		cfg := topicsConfig(def, topics)
		if got, want := minEvents(cfg, topics*WatchersPerTopic), TopicsQueueShare*topics*fanout.DefaultQueueLength; got < want || cfg.Events != 0 {
			t.Errorf("%d topics: at least %d events, want %d; events %d", topics, got, want, cfg.Events)
		}
	}
	if got, want := topicsConfig(def, 1).MinEvents, max(def.MinEvents, TopicsQueueShare*fanout.DefaultQueueLength); got != want {
		t.Errorf("1 topic: MinEvents %d, want %d (raised only as far as the queues need)", got, want)
	}
	if got := topicsConfig(def, TopicsFixedFrom); got.Events/ShortShare < 2*TopicsFixedFrom*fanout.DefaultQueueLength {
		t.Errorf("%d topics: %d events, a short run of %d", TopicsFixedFrom, got.Events, got.Events/ShortShare)
	}
	fixed := def
	fixed.Events = 1000
	if got := topicsConfig(fixed, 1000); got.Events != 1000 || got.MinEvents != def.MinEvents {
		t.Errorf("with fixed events: %+v", got)
	}
	if n := len(TopicSystems(WatermillMaxTopics + 1)); n != len(TopicSystems(1))-3 {
		t.Errorf("%d systems above %d topics", n, WatermillMaxTopics)
	}
}
