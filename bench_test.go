package fanout_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
)

// The workload of the benchmark harness: one producer, N watchers each
// drained by its own goroutine doing no work, queue length 100. The time of
// an iteration includes draining, so deliveries/s is end to end.

var benchWatchers = []int{1, 10, 100, 1000}

const benchQueue = 100

// benchEvent is the benchmarks' value. Its blank field gives it a size, as
// a real event has: pointers to zero-size values need not be distinct and
// are never allocated.
type benchEvent struct{ _ int }

var benchStrategies = []struct {
	name string
	beh  fanout.FullChannelBehavior
}{
	{"wait", fanout.WaitIfChannelFull},
	{"drop", fanout.DropIfChannelFull},
	{"drop-oldest", fanout.DropOldestIfChannelFull},
}

func BenchmarkBroadcast(b *testing.B) {
	for _, st := range benchStrategies {
		for _, api := range []string{"pull", "chan"} {
			for _, n := range benchWatchers {
				b.Run(fmt.Sprintf("%s/%s/watchers=%d", st.name, api, n), func(b *testing.B) {
					benchBroadcast(b, st.beh, api, n)
				})
			}
		}
	}
}

func benchBroadcast(b *testing.B, beh fanout.FullChannelBehavior, api string, watchers int) {
	bc := fanout.New[*benchEvent](fanout.WithQueueLength(benchQueue), fanout.WithFullChannelBehavior(beh))
	var wg sync.WaitGroup
	received := make([]int, watchers)
	for i := range watchers {
		w, err := bc.Watch()
		if err != nil {
			b.Fatal(err)
		}
		if api == "chan" {
			ch := w.ResultChan()
			wg.Go(func() {
				for range ch {
					received[i]++
				}
			})
			continue
		}
		wg.Go(func() { received[i] = drainCount(w) })
	}
	ev := &benchEvent{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := bc.Action(ev); err != nil {
			b.Fatal(err)
		}
	}
	bc.Shutdown()
	wg.Wait()
	b.StopTimer()
	reportDeliveries(b, received, watchers)
}

// BenchmarkRawChannels is the baseline: the producer sends straight into N
// buffered channels (lossless), each drained by its own goroutine.
func BenchmarkRawChannels(b *testing.B) {
	for _, n := range benchWatchers {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			chans := make([]chan *benchEvent, n)
			received := make([]int, n)
			var wg sync.WaitGroup
			for i := range chans {
				chans[i] = make(chan *benchEvent, benchQueue)
				wg.Go(func() {
					for range chans[i] {
						received[i]++
					}
				})
			}
			ev := &benchEvent{}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, ch := range chans {
					ch <- ev
				}
			}
			for _, ch := range chans {
				close(ch)
			}
			wg.Wait()
			b.StopTimer()
			reportDeliveries(b, received, n)
		})
	}
}

func reportDeliveries(b *testing.B, received []int, watchers int) {
	total := 0
	for _, r := range received {
		total += r
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(total)/s, "deliveries/s")
	}
	if want := b.N * watchers; total < want {
		b.ReportMetric(100*float64(want-total)/float64(want), "drop%")
	}
}

// BenchmarkActionOrDrop measures the never-blocking publish with 100 idle
// lossy watchers that are never read (every value is dropped for them).
func BenchmarkActionOrDropStalledWatchers(b *testing.B) {
	bc := fanout.New[*benchEvent](fanout.WithQueueLength(benchQueue), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	defer bc.Shutdown()
	for range 100 {
		if _, err := bc.Watch(); err != nil {
			b.Fatal(err)
		}
	}
	ev := &benchEvent{}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = bc.ActionOrDrop(ev)
	}
}

// BenchmarkCorrelate measures the correlator with all three stages on, with
// client-go's defaults, for a value that repeats (the dedup hit path) and
// for values spread over many keys (cache misses and evictions). The key
// functions are part of the cost, as in any real use.
func BenchmarkCorrelate(b *testing.B) {
	cfg := fanout.CorrelatorConfig[benchLog]{
		Aggregate: &fanout.AggregateStage[benchLog]{
			Key: func(e benchLog) (string, string) { return e.obj + "\x00" + e.reason, e.msg },
			Combine: func(e benchLog, _ time.Time) benchLog {
				e.msg = "(combined from similar events): " + e.msg
				return e
			},
		},
		Dedup: &fanout.DedupStage[benchLog]{
			Key: func(e benchLog) string { return e.obj + "\x00" + e.reason + "\x00" + e.msg },
			Repeat: func(e, prev benchLog, n int) benchLog {
				e.count = n
				return e
			},
		},
		Spam: &fanout.SpamStage[benchLog]{Key: func(e benchLog) string { return e.obj }, Rate: math.Inf(1)},
	}
	const keys = 10000
	events := make([]benchLog, keys)
	for i := range events {
		events[i] = benchLog{obj: fmt.Sprint("pod-", i%500), reason: "BackOff", msg: fmt.Sprint("restarting container ", i)}
	}
	for _, bc := range []struct {
		name string
		n    int
	}{{"repeat", 1}, {"keys=10000", keys}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := fanout.NewCorrelator(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Correlate(events[i%bc.n])
				i++
			}
		})
	}
}

type benchLog struct {
	obj, reason, msg string
	count            int
}

// BenchmarkRecord measures Record into a recorder with one handler runner
// that does no work: the cost a service pays per recorded value.
func BenchmarkRecord(b *testing.B) {
	r, err := fanout.NewRecorder[*benchEvent]()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.StartHandler(func(*benchEvent) {}); err != nil {
		b.Fatal(err)
	}
	e := &benchEvent{}
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Record(e)
	}
	b.StopTimer()
	_ = r.Flush(context.Background())
	st := r.Stats()
	b.ReportMetric(float64(st.DroppedFull)/float64(st.Recorded)*100, "%dropped")
	_ = r.Shutdown(context.Background())
}

// benchSink stores nothing.
type benchSink struct{}

func (benchSink) Create(_ context.Context, e benchLog) (benchLog, error) { return e, nil }
func (benchSink) Update(_ context.Context, e benchLog) (benchLog, error) { return e, nil }

// BenchmarkSinkRunner measures a sink runner's path per value: queue,
// correlation (repeats of one key) and a write to a sink that stores
// nothing, in batches that fit the queue, each flushed.
func BenchmarkSinkRunner(b *testing.B) {
	r, err := fanout.NewRecorder[benchLog]()
	if err != nil {
		b.Fatal(err)
	}
	c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[benchLog]{
		Dedup: &fanout.DedupStage[benchLog]{
			Key:    func(e benchLog) string { return e.obj },
			Repeat: func(e, _ benchLog, n int) benchLog { e.count = n; return e },
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.StartSink(benchSink{}, c); err != nil {
		b.Fatal(err)
	}
	e := benchLog{obj: "pod", reason: "BackOff", msg: "restarting"}
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		_ = r.Record(e)
		if n++; n%500 == 0 {
			_ = r.Flush(ctx)
		}
	}
	_ = r.Flush(ctx)
	b.StopTimer()
	if st := r.Stats(); st.Dropped != 0 {
		b.Fatalf("%d dropped", st.Dropped)
	}
	_ = r.Shutdown(ctx)
}

// BenchmarkFilter is the harness's filter workload: N lossless watchers,
// watcher i keeping the values v with v%10 == i%10, against the same
// watchers reading everything and discarding by hand. kept/s counts the
// values kept.
func BenchmarkFilter(b *testing.B) {
	for _, api := range []string{"filter", "by-hand"} {
		for _, n := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/watchers=%d", api, n), func(b *testing.B) {
				benchFilter(b, api == "filter", n)
			})
		}
	}
}

func benchFilter(b *testing.B, filter bool, watchers int) {
	bc := fanout.New[int](fanout.WithQueueLength(benchQueue))
	var wg sync.WaitGroup
	kept := make([]int, watchers)
	for i := range watchers {
		mine := func(v int) bool { return v%10 == i%10 }
		var opts []fanout.Option
		if filter {
			opts = append(opts, fanout.WithFilter(mine))
		}
		w, err := bc.Watch(opts...)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			buf := make([]int, benchQueue)
			for {
				n, err := w.Recv(context.Background(), buf)
				for _, v := range buf[:n] {
					if mine(v) {
						kept[i]++
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	v := 0
	for b.Loop() {
		if err := bc.Action(v); err != nil {
			b.Fatal(err)
		}
		v++
	}
	bc.Shutdown()
	wg.Wait()
	b.StopTimer()
	total := 0
	for _, k := range kept {
		total += k
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "kept/s")
}

// BenchmarkFilterRound is the cost of a filtered read without the
// scheduler: one goroutine publishes a batch of 40 values and reads them
// back, with a filter keeping one in ten against reading all and
// discarding by hand. BenchmarkFilter, with a goroutine per watcher, moves
// with how often the readers park; this moves with the read path only.
func BenchmarkFilterRound(b *testing.B) {
	for _, api := range []string{"filter", "by-hand"} {
		b.Run(api, func(b *testing.B) {
			benchFilterRound(b, api == "filter")
		})
	}
}

func benchFilterRound(b *testing.B, filter bool) {
	const batch = 40
	keep := func(v int) bool { return v%10 == 3 }
	bc := fanout.New[int](fanout.WithQueueLength(benchQueue))
	defer bc.Shutdown()
	var opts []fanout.Option
	if filter {
		opts = append(opts, fanout.WithFilter(keep))
	}
	w, err := bc.Watch(opts...)
	if err != nil {
		b.Fatal(err)
	}
	vals := make([]int, batch)
	for i := range vals {
		vals[i] = i
	}
	buf := make([]int, benchQueue)
	ctx := context.Background()
	kept := 0
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bc.ActionBatch(vals); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < batch; {
			n, err := w.Recv(ctx, buf)
			if err != nil {
				b.Fatal(err)
			}
			got += n
			if filter { // one Recv takes the batch, returns the kept values
				kept += n
				got = batch
				continue
			}
			for _, v := range buf[:n] {
				if keep(v) {
					kept++
				}
			}
		}
	}
	if want := b.N * batch / 10; kept != want {
		b.Fatalf("%d values kept, want %d", kept, want)
	}
}

// BenchmarkTopics is the harness's topics workload: T topics with
// benchPerTopic watchers each, every watcher drained by its own goroutine
// doing no work, P producers publishing round-robin over the topics (each
// from its own offset), at the default queue length. "topics" publishes
// with Topics.Publish, "publisher" with a TopicPublisher per topic, kept
// in a map; "by-hand" is the baseline: one Broadcaster per topic, in a map
// built up front, published to with Action. The three of one size run one
// after the other, so that a run of one size is a comparison. A run must
// publish many times what the queues hold (topics × 1,024): at 1,000
// topics, -benchtime 4000000x; shorter runs fit in the queues, and their
// figures vary tenfold with when the readers happen to wake.
func BenchmarkTopics(b *testing.B) {
	for _, producers := range []int{1, 4} {
		for _, topics := range []int{1, 10, 100, 1000} {
			for _, api := range []string{"topics", "publisher", "by-hand"} {
				b.Run(fmt.Sprintf("producers=%d/topics=%d/%s", producers, topics, api), func(b *testing.B) {
					benchTopics(b, api, producers, topics)
				})
			}
		}
	}
}

const benchPerTopic = 10

// drainCount reads w with Recv, doing no work with the values, until it
// closes, and returns how many it read.
func drainCount(w *fanout.Watcher[*benchEvent]) int {
	buf := make([]*benchEvent, fanout.DefaultQueueLength)
	n := 0
	for {
		k, err := w.Recv(context.Background(), buf)
		n += k
		if err != nil {
			return n
		}
	}
}

func benchTopics(b *testing.B, api string, producers, topics int) {
	sys := benchTopicsSystem(api)
	var wg sync.WaitGroup
	received := make([]int, topics*benchPerTopic)
	for i := range received {
		w, err := sys.watch(i % topics)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { received[i] = drainCount(w) })
	}
	publish := sys.publisher(topics)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	publishRoundRobin(b, producers, topics, publish)
	sys.shutdown()
	wg.Wait()
	b.StopTimer()
	reportDeliveries(b, received, benchPerTopic)
}

// benchTopicsSys is a way of publishing to topics.
type benchTopicsSys struct {
	watch     func(topic int) (*fanout.Watcher[*benchEvent], error)
	publisher func(topics int) func(topic int, v *benchEvent) error
	shutdown  func()
}

func benchTopicsSystem(api string) benchTopicsSys {
	opts := []fanout.Option{fanout.WithQueueLength(fanout.DefaultQueueLength), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull)}
	if api != "by-hand" {
		tp := fanout.NewTopics[int, *benchEvent](opts...)
		sys := benchTopicsSys{watch: func(k int) (*fanout.Watcher[*benchEvent], error) { return tp.Watch(k) }, shutdown: tp.Shutdown}
		sys.publisher = func(int) func(int, *benchEvent) error { return tp.Publish }
		if api == "publisher" {
			sys.publisher = func(topics int) func(int, *benchEvent) error {
				ps := map[int]*fanout.TopicPublisher[int, *benchEvent]{}
				for k := range topics {
					ps[k] = tp.Publisher(k)
				}
				return func(k int, v *benchEvent) error { return ps[k].Publish(v) }
			}
		}
		return sys
	}
	bs := map[int]*fanout.Broadcaster[*benchEvent]{}
	return benchTopicsSys{
		watch: func(k int) (*fanout.Watcher[*benchEvent], error) {
			if bs[k] == nil {
				bs[k] = fanout.New[*benchEvent](opts...)
			}
			return bs[k].Watch()
		},
		publisher: func(int) func(int, *benchEvent) error {
			return func(k int, v *benchEvent) error { return bs[k].Action(v) }
		},
		shutdown: func() {
			for _, b := range bs {
				b.Shutdown()
			}
		},
	}
}

// BenchmarkTopicsPublish is the publish path alone, without the readers'
// wake-ups that dominate BenchmarkTopics: every topic keeps a history of
// one value and has no watcher, so that every publish takes the fast path
// and wakes nobody. P producers publish round-robin over T topics, each
// from its own offset, with Topics.Publish, a TopicPublisher per topic,
// or Action on a Broadcaster per topic kept in a map.
func BenchmarkTopicsPublish(b *testing.B) {
	for _, producers := range []int{1, 4} {
		for _, topics := range []int{1, 10, 100, 1000} {
			for _, api := range []string{"topics", "publisher", "by-hand"} {
				b.Run(fmt.Sprintf("producers=%d/topics=%d/%s", producers, topics, api), func(b *testing.B) {
					benchTopicsPublish(b, api, producers, topics)
				})
			}
		}
	}
}

func benchTopicsPublish(b *testing.B, api string, producers, topics int) {
	publish := benchPublishers(api, topics)
	ev := &benchEvent{}
	for range 2 { // creates every topic of a Topics, and lets its view catch up
		for k := range topics {
			if err := publish(k, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	publishRoundRobin(b, producers, topics, publish)
}

// publishRoundRobin publishes b.N values from producers goroutines, each
// round-robin over the topics from its own offset, and returns once all
// are done.
func publishRoundRobin(b *testing.B, producers, topics int, publish func(int, *benchEvent) error) {
	ev := &benchEvent{}
	var pg sync.WaitGroup
	for p := range producers {
		n := b.N / producers
		if p < b.N%producers {
			n++
		}
		pg.Go(func() {
			for i := range n {
				if err := publish((p*topics/producers+i)%topics, ev); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	pg.Wait()
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it per operation, as cpu-ns/op. On a machine that other
// work loads, the CPU time a run takes varies less than its wall time,
// which depends on how much of the CPUs the run was given.
func reportCPU(b *testing.B) func() {
	c0, ok := processCPU()
	return func() {
		if c1, ok1 := processCPU(); ok && ok1 {
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		}
	}
}

// benchPublishers returns the publish function of api over topics that
// keep a history of one value.
func benchPublishers(api string, topics int) func(int, *benchEvent) error {
	opts := []fanout.Option{fanout.WithHistory(1)}
	switch api {
	case "topics":
		return fanout.NewTopics[int, *benchEvent](opts...).Publish
	case "publisher":
		tp := fanout.NewTopics[int, *benchEvent](opts...)
		ps := map[int]*fanout.TopicPublisher[int, *benchEvent]{}
		for k := range topics {
			ps[k] = tp.Publisher(k)
		}
		return func(k int, v *benchEvent) error { return ps[k].Publish(v) }
	}
	bs := map[int]*fanout.Broadcaster[*benchEvent]{}
	for k := range topics {
		bs[k] = fanout.New[*benchEvent](opts...)
	}
	return func(k int, v *benchEvent) error { return bs[k].Action(v) }
}
