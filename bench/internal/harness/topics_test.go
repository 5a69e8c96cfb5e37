package harness

import (
	"fmt"
	"testing"
)

// Every topic system delivers each value to every watcher of its topic,
// and to no other, and leaves no goroutine once torn down: watermill's
// Close waits for every message to be acked, cskr's Shutdown follows the
// Pubs before it.
func TestTopicSystemsDeliverEachValueToItsTopicOnly(t *testing.T) {
	for _, topics := range []int{1, 3} {
		for _, s := range TopicSystems(topics) {
			const events = 301 // not a multiple of the topics
			smp, err := measure(variant{sys: s}, topics*WatchersPerTopic, 1, events)
			if err != nil {
				t.Fatalf("%s: %v", s.Label(), err)
			}
			name := fmt.Sprintf("%s, %d topics", s.Label(), topics)
			if smp.expected != events*WatchersPerTopic || smp.delivered != smp.expected || !smp.settled {
				t.Errorf("%s: delivered %d, expected %d (want %d), settled %v", name, smp.delivered, smp.expected,
					events*WatchersPerTopic, smp.settled)
			}
		}
	}
}

func TestTopicSystemsLabelsAndValidation(t *testing.T) {
	for s, want := range map[System]string{
		FanoutTopics(10):              "fanout Topics",
		Cskr(10):                      "cskr/pubsub q100",
		Watermill(StrategyAck, 10):    "watermill GoChannel ack q100",
		Watermill(StrategyAsync, 100): "watermill GoChannel async q100",
	} {
		if got := s.Label(); got != want {
			t.Errorf("%+v: label %q, want %q", s, got, want)
		}
	}
	for _, s := range []System{FanoutTopics(0), Watermill(StrategyWait, 1), Cskr(2)} {
		if _, err := s.start(3, 0, nil); err == nil {
			t.Errorf("%+v started with 3 watchers", s)
		}
	}
}
