package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fanout-go/fanout"
)

type Event struct {
	Type string
	Name string
}

func Example() {
	b := fanout.New[Event]() // queue length 100, WaitIfChannelFull
	w, err := b.Watch()
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			fmt.Println(ev.Type, ev.Name)
		}
	}()
	_ = b.Action(Event{"ADDED", "pod-a"})
	_ = b.Action(Event{"MODIFIED", "pod-a"})
	b.Shutdown() // what was accepted stays readable, then the channel closes
	<-done
	// Output:
	// ADDED pod-a
	// MODIFIED pod-a
}

// The pull API reads in batches from the broadcaster's shared ring: the
// fastest path.
func ExampleWatcher_Recv() {
	b := fanout.New[int]()
	w, _ := b.Watch()
	for i := 1; i <= 5; i++ {
		_ = b.Action(i)
	}
	b.Shutdown()

	buf := make([]int, 3)
	for {
		n, err := w.Recv(context.Background(), buf)
		if err != nil {
			fmt.Println("closed:", errors.Is(err, fanout.ErrStopped))
			return
		}
		fmt.Println(buf[:n])
	}
	// Output:
	// [1 2 3]
	// [4 5]
	// closed: true
}

func ExampleWatcher_All() {
	b := fanout.New[string]()
	w, _ := b.Watch()
	_ = b.Action("a")
	_ = b.Action("b")
	b.Shutdown()
	for v := range w.All(context.Background()) {
		fmt.Println(v)
	}
	// Output:
	// a
	// b
}

// A list-then-watch consumer passes the listed state as the prefix: it is
// delivered first, then every later value, with no gap.
func ExampleBroadcaster_WatchWithPrefix() {
	b := fanout.New[string]()
	w, _ := b.WatchWithPrefix([]string{"existing-1", "existing-2"})
	_ = b.Action("new")
	b.Shutdown()
	for v := range w.ResultChan() {
		fmt.Println(v)
	}
	// Output:
	// existing-1
	// existing-2
	// new
}

// Strategies are per watcher: a slow, lossy watcher never holds up the
// publisher or the other watchers, and what it missed is counted.
func ExampleDropIfChannelFull() {
	b := fanout.New[int](fanout.WithQueueLength(3))
	slow, _ := b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	for i := 1; i <= 5; i++ {
		_ = b.Action(i) // never waits for slow
	}
	b.Shutdown()
	for v := range slow.ResultChan() {
		fmt.Print(v, " ")
	}
	fmt.Println("dropped:", slow.Stats().DroppedFull)
	// Output:
	// 1 2 3 dropped: 2
}

func ExampleDropOldestIfChannelFull() {
	b := fanout.New[int](fanout.WithQueueLength(3), fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	w, _ := b.Watch()
	for i := 1; i <= 5; i++ {
		_ = b.Action(i)
	}
	b.Shutdown()
	for v := range w.ResultChan() {
		fmt.Print(v, " ")
	}
	fmt.Println("dropped:", w.Stats().DroppedOldest)
	// Output:
	// 3 4 5 dropped: 2
}

// EvictAfter is a user-defined FullChannelBehavior: it drops values for a
// full watcher, and closes the watcher once it has missed K in a row.
type EvictAfter struct{ K uint64 }

func (e EvictAfter) OnFull(s fanout.FullState) fanout.Decision {
	if s.ConsecutiveDrops+1 >= e.K {
		return fanout.Decision{Verdict: fanout.VerdictEvict}
	}
	return fanout.Decision{Verdict: fanout.VerdictDropFull}
}

func ExampleFullChannelBehavior() {
	b := fanout.New[int](fanout.WithQueueLength(2))
	w, _ := b.Watch(fanout.WithFullChannelBehavior(EvictAfter{K: 3}))
	for i := 1; i <= 10; i++ {
		_ = b.Action(i) // 3 and 4 are dropped, 5 evicts
	}
	for v := range w.ResultChan() {
		fmt.Println(v)
	}
	fmt.Println(w.Err(), w.Stats().Dropped)
	b.Shutdown()
	// Output:
	// 1
	// 2
	// fanout: watcher evicted: queue full 3
}

func ExampleBroadcaster_ActionOrDrop() {
	b := fanout.New[int](fanout.WithQueueLength(1))
	w, _ := b.Watch()
	ok1, _ := b.ActionOrDrop(1)
	ok2, _ := b.ActionOrDrop(2) // w is full and waits: refused, nobody gets 2
	fmt.Println(ok1, ok2, b.Stats().Refused)
	v, _ := w.Next(context.Background())
	fmt.Println(v)
	b.Shutdown()
	// Output:
	// true false 1
	// 1
}

func ExampleWithDropHandler() {
	drops := make(chan fanout.Drop, 10)
	b := fanout.New[int](
		fanout.WithQueueLength(1),
		fanout.WithFullChannelBehavior(fanout.DropIfChannelFull),
		fanout.WithDropHandler(func(d fanout.Drop) { drops <- d }), // never block here
	)
	w, _ := b.Watch()
	_ = b.Action(1)
	_ = b.Action(2)
	d := <-drops
	fmt.Println(d.WatcherID == w.ID(), d.Reason)
	b.Shutdown()
	// Output:
	// true full
}

// LogEvent is a log-like event of a plain Go service.
type LogEvent struct {
	Level, Msg  string
	Count       int
	First, Last time.Time
}

// logSink stands in for a store of events: a file, a database, a remote
// service. It prints what it is asked to write.
type logSink struct{}

func (logSink) Create(_ context.Context, e LogEvent) (LogEvent, error) {
	fmt.Printf("create %s %q\n", e.Level, e.Msg)
	return e, nil
}

func (logSink) Update(_ context.Context, e LogEvent) (LogEvent, error) {
	fmt.Printf("update %s %q (x%d)\n", e.Level, e.Msg, e.Count)
	return e, nil
}

// A service records its events without ever blocking; the sink receives
// each distinct event once, repeats as counted updates, and at most three
// events per message (then one per five minutes). Flush before exit makes
// sure everything recorded has been written.
func ExampleRecorder() {
	rec, _ := fanout.NewRecorder[LogEvent](
		fanout.WithStamp(func(e LogEvent, now time.Time) LogEvent {
			e.First, e.Last = now, now
			return e
		}),
	)
	corr, _ := fanout.NewCorrelator(fanout.CorrelatorConfig[LogEvent]{
		Dedup: &fanout.DedupStage[LogEvent]{
			Key: func(e LogEvent) string { return e.Level + "\x00" + e.Msg },
			Repeat: func(e, prev LogEvent, n int) LogEvent {
				e.First, e.Count = prev.First, n
				return e
			},
		},
		Spam: &fanout.SpamStage[LogEvent]{
			Key:   func(e LogEvent) string { return e.Msg },
			Burst: 3,
			Rate:  1.0 / 300,
		},
	})
	_, _ = rec.StartSink(logSink{}, corr)

	_ = rec.Record(LogEvent{Level: "info", Msg: "service started"})
	for range 5 {
		_ = rec.Record(LogEvent{Level: "warn", Msg: "disk 91% full"})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rec.Flush(ctx) // before exit: wait for the writes
	st := rec.Stats()
	fmt.Printf("recorded %d, written %d, skipped as spam %d\n", st.Recorded, st.Written, st.DroppedSpam)
	_ = rec.Shutdown(ctx)
	// Output:
	// create info "service started"
	// create warn "disk 91% full"
	// update warn "disk 91% full" (x2)
	// update warn "disk 91% full" (x3)
	// recorded 6, written 4, skipped as spam 2
}

// A dedup stage that appends its keys: a repeat is looked up in the
// correlator's own buffer, so counting it allocates no key.
func ExampleDedupStage_appendKey() {
	corr, _ := fanout.NewCorrelator(fanout.CorrelatorConfig[LogEvent]{
		Dedup: &fanout.DedupStage[LogEvent]{
			AppendKey: func(dst []byte, e LogEvent) []byte {
				dst = append(dst, e.Level...)
				return append(append(dst, 0), e.Msg...)
			},
		},
	})
	for _, msg := range []string{"disk 91% full", "disk 91% full", "service started", "disk 91% full"} {
		r := corr.Correlate(LogEvent{Level: "warn", Msg: msg})
		fmt.Printf("%q: occurrence %d\n", msg, r.Count)
	}
	// Output:
	// "disk 91% full": occurrence 1
	// "disk 91% full": occurrence 2
	// "service started": occurrence 1
	// "disk 91% full": occurrence 3
}

func ExampleWithFilter() {
	b := fanout.New[Event]()
	deletions, _ := b.Watch(fanout.WithName("deletions"),
		fanout.WithFilter(func(ev Event) bool { return ev.Type == "DELETED" }))
	_ = b.Action(Event{"ADDED", "pod-a"})
	_ = b.Action(Event{"DELETED", "pod-a"})
	b.Shutdown()
	for ev := range deletions.All(context.Background()) {
		fmt.Println(ev.Type, ev.Name)
	}
	fmt.Println("filtered:", deletions.Stats().Filtered)
	// Output:
	// DELETED pod-a
	// filtered: 1
}

func ExampleTopics() {
	t := fanout.NewTopics[string, Event]()
	pods, _ := t.Watch("pods")
	both, _ := t.WatchTopics([]string{"pods", "nodes"})
	_ = t.Publish("pods", Event{"ADDED", "pod-a"})
	_ = t.Publish("nodes", Event{"ADDED", "node-1"})
	_ = t.Publish("leases", Event{"ADDED", "lease-x"}) // nobody listens: costs nothing
	t.Shutdown()
	for ev := range pods.All(context.Background()) {
		fmt.Println("pods:", ev.Name)
	}
	n := 0
	for range both.All(context.Background()) {
		n++
	}
	fmt.Println("pods and nodes:", n, "values; unheard:", t.Stats().Unheard)
	// Output:
	// pods: pod-a
	// pods and nodes: 2 values; unheard: 1
}

func ExampleWithWaitReport() {
	reports := make(chan fanout.WaitReport, 1)
	b := fanout.New[int](fanout.WithQueueLength(1),
		fanout.WithWaitReport(10*time.Millisecond, func(r fanout.WaitReport) { reports <- r }))
	w, _ := b.Watch(fanout.WithName("slow consumer"))
	_ = b.Action(1)                 // fills its queue
	go func() { _ = b.Action(2) }() // waits for it
	r := <-reports
	fmt.Printf("%q holds %d of %d\n", r.WatcherName, r.Queued, r.QueueLength)
	_, _ = w.Next(context.Background())
	b.Shutdown()
	// Output:
	// "slow consumer" holds 1 of 1
}

func ExampleWithName() {
	b := fanout.New[int](fanout.WithQueueLength(1))
	w, _ := b.Watch(fanout.WithName("audit"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull),
		fanout.WithDropHandler(func(d fanout.Drop) { fmt.Printf("%q missed a value: %v\n", d.WatcherName, d.Reason) }))
	_ = b.Action(1)
	_ = b.Action(2) // its queue is full
	fmt.Printf("%q: %d dropped\n", w.Stats().Name, w.Stats().DroppedFull)
	b.Shutdown()
	// Output:
	// "audit" missed a value: full
	// "audit": 1 dropped
}
