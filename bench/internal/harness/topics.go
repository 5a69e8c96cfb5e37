package harness

import (
	"fmt"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/fanout-go/fanout"
)

// The topics group: T topics with [WatchersPerTopic] watchers each, P
// producers each publishing round-robin over the topics from a topic of
// its own, every watcher reading everything on its topic and checking
// that each producer's values come in that producer's order; the figure
// is delivered values per second. The instances are in topics_systems.go.

// Names of the topic systems.
const (
	// SystemCskr is github.com/cskr/pubsub/v2: one goroutine of the library
	// serves every Sub and Pub through one command channel and sends,
	// blocking, into each subscriber's channel.
	SystemCskr = "cskr"
	// SystemWatermill is github.com/ThreeDotsLabs/watermill's GoChannel.
	SystemWatermill = "watermill"
)

// Read paths of the topics group.
const (
	// APITopics is each system's own per-topic subscription.
	APITopics = "topics"
	// APITopicsByHand is fanout's baseline: one Broadcaster per topic, in
	// a map built by hand, each watcher a Watch of its topic's.
	APITopicsByHand = "topics-by-hand"
)

// isTopicsAPI reports whether api is a read path of the topics group.
func isTopicsAPI(api string) bool { return api == APITopics || api == APITopicsByHand }

// WatchersPerTopic is the watchers of each topic in the topics group.
const WatchersPerTopic = 10

// WatermillPayload is the payload of a watermill message: a user of
// GoChannel publishes []byte, so the harness sends a small one, 8 bytes
// (the value's sequence number, which the reader checks), in a new
// message with a new UUID each publish.
const WatermillPayload = 8

// Watermill's GoChannel configurations, as they appear in [System].Strategy.
const (
	// StrategyAck is GoChannel with BlockPublishUntilSubscriberAck: Publish
	// returns once every subscriber of the topic has acked the message,
	// so at most one message per topic is in flight, delivered in order.
	StrategyAck = "ack"
	// StrategyAsync is GoChannel without it: Publish starts a goroutine
	// per message and subscriber and returns; nothing bounds the messages
	// in flight, and a subscriber gets them out of order (every run the
	// harness made, one producer and one topic included): it is shown as
	// reordering, and not ranked. Lossless as long as GoChannel is not
	// closed before every message is acked.
	StrategyAsync = "async"
)

// FanoutTopics is fanout.Topics with the given topics: wait strategy,
// fanout's default queue length ([fanout.DefaultQueueLength]), as a user
// who sets none has it (the peers too are at their defaults), each watcher a Watch(k) read with Recv, every value published with
// Publish(k, v).
func FanoutTopics(topics int) System {
	return System{Name: SystemFanout, Strategy: StrategyWait, API: APITopics, Queue: fanout.DefaultQueueLength, Topics: topics}
}

// FanoutTopicsByHand is the by-hand baseline of fanout.Topics: one
// fanout.Broadcaster per topic, made up front and kept in a map, wait
// strategy, fanout's default queue length as Topics has it; Action(v) on
// the topic's broadcaster, each watcher
// a Watch of it read with Recv. What Topics adds (topics that come and go
// with their watchers, watchers of several topics, counters) it has not.
func FanoutTopicsByHand(topics int) System {
	return System{Name: SystemFanout, Strategy: StrategyWait, API: APITopicsByHand, Queue: fanout.DefaultQueueLength, Topics: topics}
}

// KelindarTopics is kelindar/event with one event type per topic: each
// watcher a SubscribeTo of its topic's type, each value published with
// Publish of an event whose Type is its topic. Each type has its own
// group, ticker goroutine and queues of [KelindarQueue].
func KelindarTopics(topics int) System {
	return System{Name: SystemKelindar, Strategy: StrategyWait, API: APITopics, Queue: KelindarQueue, Topics: topics}
}

// Cskr is cskr/pubsub with the given topics: New(100), so each Sub channel
// holds 100 values; Pub(v, topic) blocks until every subscriber's channel
// took v.
func Cskr(topics int) System {
	return System{Name: SystemCskr, Strategy: StrategyWait, API: APITopics, Queue: DefaultQueue, Topics: topics}
}

// Watermill is GoChannel with the given configuration ([StrategyAck] or
// [StrategyAsync]) and topics, OutputChannelBuffer 100; each watcher ranges
// over its Subscribe channel and acks every message.
func Watermill(strategy string, topics int) System {
	return System{Name: SystemWatermill, Strategy: strategy, API: APITopics, Queue: DefaultQueue, Topics: topics}
}

// TopicSystems returns the systems of the topics group with the given
// topics: fanout Topics first, the by-hand baseline second (the two
// references of the group's ratios), then the peers; cskr/pubsub and
// watermill up to [WatermillMaxTopics] topics.
func TopicSystems(topics int) []System {
	out := []System{FanoutTopics(topics), FanoutTopicsByHand(topics), KelindarTopics(topics)}
	if topics > WatermillMaxTopics {
		return out
	}
	return append(out, Cskr(topics), Watermill(StrategyAck, topics), Watermill(StrategyAsync, topics))
}

// WatermillMaxTopics is the most topics watermill and cskr/pubsub are
// measured with. At 1,000 topics the runs must publish what fanout's
// queues hold (see [TopicsFixedFrom]), 8 million values: cskr's would take
// about 20 s each, watermill's minutes; both are 30 to 100 times behind
// fanout at every count below.
const WatermillMaxTopics = 100

// reorders reports whether the system delivers a producer's values to a
// watcher out of their order: watermill's GoChannel in its asynchronous
// mode. Such a system is shown as reordering and not ranked.
func (s System) reorders() bool { return s.Name == SystemWatermill && s.Strategy == StrategyAsync }

func topicsLabel(s System) string {
	switch {
	case s.API == APITopicsByHand:
		return "fanout Broadcaster per topic, by hand"
	case s.Name == SystemFanout:
		return "fanout Topics"
	case s.Name == SystemKelindar:
		return fmt.Sprintf("kelindar by type q%d", s.Queue)
	case s.Name == SystemWatermill:
		return fmt.Sprintf("watermill GoChannel %s q%d", s.Strategy, s.Queue)
	}
	return fmt.Sprintf("%s/pubsub q%d", s.Name, s.Queue)
}

func validateTopics(s System) error {
	want := System{Name: s.Name, Strategy: StrategyWait, API: APITopics, Queue: s.Queue, Topics: s.Topics}
	switch s.Name {
	case SystemFanout:
		want.API = s.API
	case SystemKelindar:
		want.Queue = KelindarQueue
	case SystemWatermill:
		want.Strategy = StrategyAck
		if s.Strategy == StrategyAsync {
			want.Strategy = StrategyAsync
		}
	case SystemCskr:
	default:
		return fmt.Errorf("harness: %s has no topics", s.Name)
	}
	if s.Topics < 1 || s.Queue < 1 || s != want {
		return fmt.Errorf("harness: %s %s %s with %d topics, queue %d", s.Name, s.Strategy, s.API, s.Topics, s.Queue)
	}
	return nil
}

// topicsGroup measures the topic systems with the given topics and
// producers, interleaved, and returns one case per system with its ratios
// to fanout Topics and to the by-hand baseline, and the values its readers
// found out of order.
func topicsGroup(cfg Config, res *Results, topics, producers int) ([]Case, error) {
	if producers > maxTopicProducers {
		return nil, fmt.Errorf("harness: topics group with %d producers (at most %d)", producers, maxTopicProducers)
	}
	cfg = topicsConfig(cfg, topics)
	systems := TopicSystems(topics)
	variants := make([]variant, len(systems))
	for i, s := range systems {
		variants[i] = variant{sys: s}
	}
	n := topics * WatchersPerTopic
	samples, err := runInterleaved(cfg, res, variants, n, producers)
	if err != nil {
		return nil, err
	}
	cases := make([]Case, len(variants))
	for i, v := range variants {
		cases[i] = summarize(KindTopics, v, n, producers, samples[i])
		cases[i].Topics = topics
		cases[i].OutOfOrder = outOfOrder(samples[i])
	}
	pairRatios(cases, samples, 0, func(c *Case, v float64) { c.RatioVsFanout = ptr(v) })
	pairRatios(cases, samples, 1, func(c *Case, v float64) { c.RatioVsByHand = ptr(v) })
	return cases, nil
}

// TopicsQueueShare is how many times what the topics' queues hold (T ×
// [fanout.DefaultQueueLength] values) the values a long run adds to its short run are at
// least: a run that its queues can absorb measures how fast the producers
// fill them, then how long the readers take to wake for what is left, not
// the steady rate. Calibrated to 60 ms, kelindar/event by type at 1,000
// topics was given 600 values, its figure that of its 500 µs ticks (22.5k
// deliveries/s); with 300,000 it delivered 3.4 M/s, as fanout did.
const TopicsQueueShare = 2

// TopicsFixedFrom is the topic count from which the topics group does not
// calibrate its runs but publishes 2 × [ShortShare] times what the
// topics' queues hold in a long run, and a [ShortShare]th of it in the
// short one, so that the short run too is past what the queues absorb:
// with calibrated runs at 1,000 topics, whose short runs the queues held,
// the same system's figure varied threefold from one repetition to the
// next.
const TopicsFixedFrom = 1000

// topicsConfig returns cfg for the topics group with the given topics:
// from [TopicsFixedFrom] topics, fixed events (see there); below, MinEvents
// raised so that a calibrated long run adds at least [TopicsQueueShare]
// times what the topics' queues hold (see minEvents, which scales
// MinEvents down above 1,000 watchers), within MaxEvents. Events given by
// the configuration stay.
func topicsConfig(cfg Config, topics int) Config {
	held := topics * fanout.DefaultQueueLength
	switch {
	case cfg.Events > 0:
	case topics >= TopicsFixedFrom:
		cfg.Events = 2 * ShortShare * held
	default:
		floor := min(TopicsQueueShare*held, cfg.MaxEvents)
		cfg.MinEvents = max(cfg.MinEvents, floor*max(1000, topics*WatchersPerTopic)/1000)
	}
	return cfg
}

// reportTopicGroups writes one table per topic count and producers.
func reportTopicGroups(b *strings.Builder, res *Results) error {
	var groups [][]Case
	for i, c := range casesOf(res.Cases, KindTopics) {
		if i == 0 || c.Topics != groups[len(groups)-1][0].Topics || c.Producers != groups[len(groups)-1][0].Producers {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], c)
	}
	for _, cs := range groups {
		fmt.Fprintf(b, "\n== topics: %s × %d watchers, %s publishing round-robin over the topics, each watcher reading all "+
			"of its topic and checking each producer's order ==\n", plural(cs[0].Topics, "topic"), WatchersPerTopic,
			plural(cs[0].Producers, "producer"))
		if err := topicsTable(b, cs); err != nil {
			return err
		}
	}
	return nil
}

// topicsTable writes the table of one topics group. A system that
// reorders is not ranked: its ratios are not shown.
func topicsTable(b *strings.Builder, cs []Case) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head, labels := padLabels(cs)
	fmt.Fprintf(tw, "%s\tdelivered/s\tvs fanout Topics\tvs by hand\torder\tns/publish\tallocs/event\tspread\tevents long/short\t\n", head)
	for i, c := range cs {
		vsFanout, vsByHand := FormatRatio(c.RatioVsFanout), FormatRatio(c.RatioVsByHand)
		if reordering(c) {
			vsFanout, vsByHand = "not ranked", "not ranked"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate), vsFanout, vsByHand,
			orderCell(c), num(c.NsPerPublish, f("%.1f")), num(c.AllocsPerEvent, f("%.2f")), num(c.SpreadPct, f("%.0f%%")),
			c.Published, c.ShortPublished)
	}
	return tw.Flush()
}

// reordering reports whether c is a case of a system that reorders, or
// whose readers found values out of order.
func reordering(c Case) bool {
	return (c.System == SystemWatermill && c.Strategy == StrategyAsync) || (c.OutOfOrder != nil && *c.OutOfOrder > 0)
}

// orderCell says whether the readers of c found every value in order.
func orderCell(c Case) string {
	switch {
	case c.OutOfOrder == nil:
		return "-"
	case *c.OutOfOrder == 0:
		return "in order"
	}
	return fmt.Sprintf("REORDERED (%d values)", *c.OutOfOrder)
}

// TargetTopics are the topic counts of the topics targets, and
// TargetTopicProducers their producers.
var (
	TargetTopics         = []int{1, 10, 100, 1000}
	TargetTopicProducers = []int{1, 4}
)

// topicTargets are the targets of the topics group with the given topics
// and producers: fanout Topics at least as fast as one Broadcaster per
// topic built by hand (at one topic, within the noise of parity:
// [MinTopicsByHandOneTopic]), and ahead of every topic peer that keeps each
// producer's order (kelindar/event by type, cskr/pubsub, watermill ack),
// from the per-repetition ratios; the measured figure of the second is
// fanout's over the fastest such peer's, named.
func topicTargets(cases []Case, topics, producers int) []Target {
	where := fmt.Sprintf("topics, %s × %d watchers, %s", plural(topics, "topic"), WatchersPerTopic, plural(producers, "producer"))
	byHand, worst, best := math.NaN(), math.NaN(), ""
	for _, c := range cases {
		if c.Kind != KindTopics || c.Topics != topics || c.Producers != producers {
			continue
		}
		switch {
		case c.System == SystemFanout && c.API == APITopics && c.RatioVsByHand != nil:
			byHand = *c.RatioVsByHand
		case c.System == SystemFanout || reordering(c) || c.RatioVsFanout == nil:
		case math.IsNaN(worst) || 1 / *c.RatioVsFanout < worst:
			worst, best = 1 / *c.RatioVsFanout, c.Label
		}
	}
	peer := check(where+": fanout Topics / fastest topic peer in order", "> 1×", worst, worst > 1, "%.2f×")
	if peer.Status != NA {
		peer.Measured += " (" + best + ")"
	}
	min := 1.0
	if topics == 1 {
		min = MinTopicsByHandOneTopic
	}
	return []Target{atLeast(where+": fanout Topics / one Broadcaster per topic by hand", byHand, min), peer}
}

// MinTopicsByHandOneTopic is the by-hand target at one topic, where a
// Topics is one broadcaster, as the baseline is, with the same publish
// path (a map look-up and Broadcaster's fast path): the two are equal, and
// their ratio is the run's noise, which ≥ 1× would fail half the time. Two
// full runs measured 0.87× and 1.07× (4 and 1 producers), then 1.00× and
// 0.98×; so the target at one topic is parity within that noise. From two
// topics on, Topics' readers yield for each other (familyYieldReaders in
// the core) and the target is ≥ 1×.
const MinTopicsByHandOneTopic = 0.85
