package fanoutnats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// process is one of several "processes" sharing a server: its own
// connection, a broadcaster whose values it forwards, and a broadcaster
// fed from NATS with local watchers.
type process struct {
	nc       *nats.Conn
	out, in  *fanout.Broadcaster[event]
	fwd      *fanoutnats.Forwarder[event]
	inbound  closer
	watchers []*fanout.Watcher[event]
}

func newProcess(t *testing.T, srv *natstest.Server, id, watchers int, fcfg fanoutnats.ForwardConfig[event]) *process {
	t.Helper()
	p := &process{nc: srv.Connect(t), out: fanout.New[event](), in: fanout.New[event]()}
	for range watchers {
		w, err := p.in.Watch()
		if err != nil {
			t.Fatal(err)
		}
		p.watchers = append(p.watchers, w)
	}
	fcfg.Subject = fmt.Sprintf("ev.%d", id)
	fwd, err := fanoutnats.Forward(p.out, p.nc, fcfg)
	if err != nil {
		t.Fatal(err)
	}
	p.fwd = fwd
	t.Cleanup(func() { closeWithin(fwd, time.Second) })
	return p
}

// produce has every process publish n values concurrently, and closes the
// forwarders once they have published them all.
func produce(t *testing.T, procs []*process, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for id, p := range procs {
		wg.Go(func() {
			for i := range n {
				if err := p.out.Action(event{Src: id, Seq: i}); err != nil {
					t.Errorf("process %d: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, p := range procs {
		closeAndWait(t, p.fwd)
	}
}

func allWatchers(procs []*process) []*fanout.Watcher[event] {
	var ws []*fanout.Watcher[event]
	for _, p := range procs {
		ws = append(ws, p.watchers...)
	}
	return ws
}

func TestCoreNATSKeepsEachPublishersOrderAtEveryWatcherOfThreeProcesses(t *testing.T) {
	srv := natstest.New(t)
	const procs, watchers, n = 3, 100, 200
	var ps []*process
	for id := range procs {
		p := newProcess(t, srv, id, watchers, fanoutnats.ForwardConfig[event]{})
		s, err := fanoutnats.Subscribe(p.nc, p.in, fanoutnats.SubscribeConfig[event]{Subject: "ev.*"})
		if err != nil {
			t.Fatal(err)
		}
		p.inbound = s
		t.Cleanup(func() { closeWithin(s, time.Second) })
		ps = append(ps, p)
	}
	done := make(chan struct{})
	go func() { defer close(done); produce(t, ps, n) }()
	for i, got := range recvAll(t, allWatchers(ps), procs*n) {
		next := make([]int, procs) // next seq expected from each publisher
		for _, e := range got {
			if e.Seq != next[e.Src] {
				t.Fatalf("watcher %d: from process %d got seq %d, want %d", i, e.Src, e.Seq, next[e.Src])
			}
			next[e.Src]++
		}
	}
	<-done
	for _, p := range ps {
		closeAndWait(t, p.inbound)
	}
}

func TestJetStreamGivesEveryWatcherOfThreeProcessesTheStreamsOrder(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev.*")
	const procs, watchers, n = 3, 100, 200
	var ps []*process
	for id := range procs {
		p := newProcess(t, srv, id, watchers, fanoutnats.ForwardConfig[event]{JetStream: true})
		durable := ""
		if id == 1 { // one durable, two ordered consumers: the same order
			durable = "proc1"
		}
		c, err := fanoutnats.Consume(guardCtx(t), natstest.JetStream(t, p.nc), p.in,
			fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable})
		if err != nil {
			t.Fatal(err)
		}
		p.inbound = c
		t.Cleanup(func() { closeWithin(c, time.Second) })
		ps = append(ps, p)
	}
	done := make(chan struct{})
	go func() { defer close(done); produce(t, ps, n) }()
	got := recvAll(t, allWatchers(ps), procs*n)
	<-done
	stream := streamOrder(t, js, "EV", procs*n)
	for i := range got {
		if !slices.Equal(got[i], stream) {
			t.Fatalf("watcher %d saw another order than the stream's", i)
		}
	}
	for _, p := range ps {
		closeAndWait(t, p.inbound)
	}
}

// streamOrder reads the first n values of a stream, in sequence order,
// with the NATS client's own ordered consumer.
func streamOrder(t *testing.T, js jetstream.JetStream, name string, n int) []event {
	t.Helper()
	cons, err := js.OrderedConsumer(guardCtx(t), name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]event, 0, n)
	for len(out) < n {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(hangGuard))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			var e event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("after %d values: %v", len(out), err)
		}
	}
	return out
}

// lossless is a producing process (a forwarder in JetStream mode behind a
// watcher that waits, and a recorder whose queue holds everything and
// whose retries outlast an outage) and two consuming processes (a durable
// and an ordered consumer feeding watchers that wait).
type lossless struct {
	out              *fanout.Broadcaster[event]
	fwd              *fanoutnats.Forwarder[event]
	rec              *fanout.Recorder[event]
	sink             *fanoutnats.Sink[event]
	durable, ordered *fanoutnats.Consumer[event]
	w, w2            *fanout.Watcher[event]
}

func newLossless(t *testing.T, srv *natstest.Server, n int) *lossless {
	t.Helper()
	l := &lossless{out: fanout.New[event](fanout.WithQueueLength(256))}
	var err error
	l.fwd, err = fanoutnats.Forward(l.out, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		Subject: "ev", JetStream: true, Batch: 64, AckTimeout: 500 * time.Millisecond, RetryWait: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(l.fwd, time.Second) })
	l.sink, err = fanoutnats.NewSink(natstest.JetStream(t, srv.Connect(t)),
		fanoutnats.SinkConfig[event]{Subject: "rec", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.rec = newRecorder(t, l.sink, 100_000, fanout.WithQueueLength(n))
	in, in2 := fanout.New[event](), fanout.New[event]()
	l.w, _ = in.Watch()
	l.w2, _ = in2.Watch()
	l.durable = consume(t, natstest.JetStream(t, srv.Connect(t)), in,
		fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll(), AckWait: time.Second})
	l.ordered = consume(t, natstest.JetStream(t, srv.Connect(t)), in2,
		fanoutnats.ConsumeConfig[event]{Stream: "EV", Start: fanoutnats.StartAll()})
	return l
}

func TestServerRestartLosesAndDuplicatesNothingWithLosslessSettings(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, admin, "EV", "ev")
	natstest.Stream(t, admin, "REC", "rec")
	const n = 3000
	l := newLossless(t, srv, n)
	go func() {
		for i := range n {
			_ = l.out.Action(event{Seq: i})
			_ = l.rec.Record(event{Seq: i})
		}
	}()
	received, received2 := recvAsync(l.w, n), recvAsync(l.w2, n)
	natstest.Eventually(t, "a third of the values", func() bool { return l.durable.Stats().Delivered >= n/3 })
	srv.Restart(t)
	got, got2 := received.wait(t), received2.wait(t)

	// End to end: every value once, in the stream's order.
	stream := streamOrder(t, admin, "EV", n)
	if !slices.Equal(got, stream) || !slices.Equal(got2, stream) {
		t.Fatal("a consumer's order differs from the stream's")
	}
	slices.SortFunc(got, func(a, b event) int { return a.Seq - b.Seq })
	for i, e := range got {
		if e.Seq != i {
			t.Fatalf("sorted, value %d has seq %d: a value was lost or duplicated", i, e.Seq)
		}
	}
	closeAndWait(t, l.fwd)
	if fs := l.fwd.Stats(); fs.Published != n || fs.Failed != 0 || streamMsgs(t, admin, "EV") != n {
		t.Fatalf("forwarder %+v, stream EV holds %d: want %d, each once", fs, streamMsgs(t, admin, "EV"), n)
	}
	if err := l.rec.Flush(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if rs := l.rec.Stats(); rs.Written != n || rs.Dropped != 0 || streamMsgs(t, admin, "REC") != n {
		t.Fatalf("recorder %+v, stream REC holds %d: want %d, each once", rs, streamMsgs(t, admin, "REC"), n)
	}
	t.Logf("forwarder %+v", l.fwd.Stats())
	t.Logf("durable %+v; ordered %+v; sink %+v", l.durable.Stats(), l.ordered.Stats(), l.sink.Stats())
}

func TestSlowRemoteConsumerHoldsBackLocalProducersOnlyWhenTheirStrategyWaits(t *testing.T) {
	strategies := []struct {
		name     string
		behavior fanout.FullChannelBehavior
	}{
		{"wait", fanout.WaitIfChannelFull},
		{"drop", fanout.DropIfChannelFull},
		{"drop-oldest", fanout.DropOldestIfChannelFull},
		{"wait-timeout", fanout.WaitTimeoutIfChannelFull(time.Millisecond)},
		{"evict", fanout.EvictIfChannelFull},
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) { slowRemoteConsumer(t, s.behavior) })
	}
}

// slowRemoteConsumer forwards 300 values through a stream that holds 10
// unacknowledged messages to a remote consumer that reads nothing until the
// producer is done (or, with Wait, has been held back).
func slowRemoteConsumer(t *testing.T, behavior fanout.FullChannelBehavior) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	if _, err := js.CreateStream(guardCtx(t), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev"},
		Retention: jetstream.InterestPolicy, MaxMsgs: 10, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	remote := fanout.New[event](fanout.WithQueueLength(1))
	rw, _ := remote.Watch()
	cons := consume(t, natstest.JetStream(t, srv.Connect(t)), remote,
		fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "remote", Start: fanoutnats.StartAll()})
	local := fanout.New[event]()
	fwd, err := fanoutnats.Forward(local, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		Subject: "ev", JetStream: true, Batch: 1, RetryWait: time.Millisecond,
		Watch: []fanout.Option{fanout.WithQueueLength(16), fanout.WithFullChannelBehavior(behavior)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(fwd, time.Second) })

	const n = 300
	stalled := -1 // index of the first value the producer would have waited for
	for i := range n {
		// Until the stream is full, one value at a time: the forwarder
		// keeps up, and the values dropped later are the remote's doing.
		if fs := fwd.Stats(); fs.Retries == 0 && fs.Watcher.Dropped == 0 && i > 0 {
			natstest.Eventually(t, "the forwarder to publish or retry", func() bool {
				fs := fwd.Stats()
				return fs.Published == uint64(i) || fs.Retries > 0
			})
		}
		if behavior == fanout.WaitIfChannelFull || behavior == fanout.WaitTimeoutIfChannelFull(time.Millisecond) {
			if ok, _ := local.ActionOrDrop(event{Seq: i}); !ok {
				stalled = i
				break
			}
			continue
		}
		if ok, err := local.ActionOrDrop(event{Seq: i}); !ok || err != nil {
			t.Fatalf("value %d: a lossy strategy made the producer wait", i)
		}
	}
	remoteGot := make(chan []event, 1)
	go func() { remoteGot <- drainUntilIdle(t, rw, fwd, cons) }()
	if stalled >= 0 { // held back: go on now that the remote reads
		for i := stalled; i < n; i++ {
			if err := local.Action(event{Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := <-remoteGot
	closeAndWait(t, fwd)
	checkSlowCounts(t, behavior, stalled, local.Stats(), fwd, cons.Stats(), got)
}

// drainUntilIdle reads the remote watcher until the forwarder has nothing
// left and the consumer delivered everything the forwarder published.
func drainUntilIdle(t *testing.T, w *fanout.Watcher[event], fwd *fanoutnats.Forwarder[event], cons *fanoutnats.Consumer[event]) []event {
	var got []event
	ctx := guardCtx(t)
	for {
		fs := fwd.Stats()
		idle := fs.Watcher.Queued == 0 && fs.Received == fs.Published+fs.Failed+fs.Abandoned
		if idle && cons.Stats().Delivered == fs.Published-fs.Duplicates && len(got) == int(cons.Stats().Delivered) {
			select {
			case <-fwd.Done(): // evicted: nothing more will come
				return got
			default:
			}
			if fs.Received+fs.Watcher.Dropped == 300 {
				return got
			}
		}
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		v, err := w.Next(short)
		cancel()
		if err == nil {
			got = append(got, v)
		} else if ctx.Err() != nil {
			t.Errorf("remote still waiting after %d values: forwarder %+v, consumer %+v", len(got), fwd.Stats(), cons.Stats())
			return got
		}
	}
}

func checkSlowCounts(t *testing.T, behavior fanout.FullChannelBehavior, stalled int, ls fanout.Stats, fwd *fanoutnats.Forwarder[event], cs fanoutnats.InboundStats, got []event) {
	t.Helper()
	fs := fwd.Stats()
	t.Logf("stalled at %d; local %+v; forwarder %+v; remote %+v", stalled, ls, fs, cs)
	if ls.Accepted != 300 || fs.Failed != 0 || fs.Abandoned != 0 || fs.Retries == 0 {
		t.Fatalf("local %+v, forwarder %+v: want 300 accepted, the full stream retried, nothing failed or abandoned", ls, fs)
	}
	if fs.Received != fs.Published || uint64(len(got)) != fs.Published-fs.Duplicates || cs.Delivered != uint64(len(got)) {
		t.Fatalf("forwarder %+v, remote got %d (%+v): counts do not add up", fs, len(got), cs)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("remote got seq %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
	switch behavior {
	case fanout.WaitIfChannelFull:
		if stalled < 0 || len(got) != 300 || fs.Watcher.Dropped != 0 {
			t.Fatalf("wait: stalled at %d, remote got %d, dropped %d: want back-pressure and no loss", stalled, len(got), fs.Watcher.Dropped)
		}
	case fanout.EvictIfChannelFull:
		if fs.Watcher.DroppedEvicted != 1 || fwd.Err() != fanout.ErrEvicted {
			t.Fatalf("evict: %+v, Err %v", fs.Watcher, fwd.Err())
		}
	default:
		if fs.Watcher.Dropped == 0 || fs.Received+fs.Watcher.Dropped != 300 {
			t.Fatalf("lossy: forwarder %+v: want drops, and received+dropped = 300", fs)
		}
	}
}

func TestSlowSubscriberCountsWhatTheNATSClientDrops(t *testing.T) {
	srv := natstest.New(t)
	b, w := blockedWatcher() // the remote watcher reads nothing for now
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev", Buffer: 16})
	const n = 100
	publishJSON(t, srv.Connect(t), "ev", events(0, n)...)
	var kept uint64 // messages the subscriber took or holds in its buffer
	natstest.Eventually(t, "every message taken, buffered or dropped", func() bool {
		st := s.Stats()
		kept = st.Received + uint64(st.Pending)
		return kept+st.SlowConsumerDropped == n
	})
	evs := recv(t, w, int(kept)) // reading unblocks the subscriber
	closeAndWait(t, s)
	st := s.Stats()
	if st.SlowConsumerDropped == 0 || st.SlowConsumerDropped+st.Delivered != n || st.Delivered != uint64(len(evs)) {
		t.Fatalf("stats %+v, %d read: want the client's drops counted and the rest delivered", st, len(evs))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("seq %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
}

func TestCloseNeverHangsOnADeadServer(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, admin, "EV", "ev")
	jsPublish(t, admin, "ev", events(0, 10)...)
	var bridges []closer
	for _, durable := range []string{"", "d"} {
		b, _ := blockedWatcher() // the consumer holds a value it cannot deliver
		bridges = append(bridges, consume(t, natstest.JetStream(t, srv.Connect(t)), b,
			fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, Start: fanoutnats.StartAll()}))
	}
	b, _ := blockedWatcher()
	bridges = append(bridges, subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev"}))
	fb := fanout.New[event]()
	fwd, err := fanoutnats.Forward(fb, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev", JetStream: true})
	if err != nil {
		t.Fatal(err)
	}
	bridges = append(bridges, fwd)
	jsPublish(t, admin, "ev", events(10, 20)...)
	_ = fb.Action(event{Seq: 20})
	srv.Shutdown() // the clients try to reconnect, for ever
	for i, br := range bridges {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		err := br.Close(ctx)
		cancel()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("bridge %d: Close took %v with a 50ms deadline (err %v)", i, d, err)
		}
		waitDone(t, br)
	}
}

func TestServerRestartLosesAndDuplicatesNoFramedValue(t *testing.T) {
	srv, admin := streamEV(t)
	const n = 5000
	out, fwd := jsForwarder(t, srv.Connect(t), 32)
	in, in2 := fanout.New[event](), fanout.New[event]()
	w, _ := in.Watch()
	w2, _ := in2.Watch()
	durable := consume(t, natstest.JetStream(t, srv.Connect(t)), in,
		fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll(), AckWait: time.Second})
	ordered := consume(t, natstest.JetStream(t, srv.Connect(t)), in2, fanoutnats.ConsumeConfig[event]{Stream: "EV", Start: fanoutnats.StartAll()})
	go func() {
		for i := 0; i < n; i += 10 {
			_, _ = out.ActionBatch(events(i, i+10))
		}
	}()
	received, received2 := recvAsync(w, n), recvAsync(w2, n)
	natstest.Eventually(t, "a third of the values", func() bool { return durable.Stats().Delivered >= n/3 })
	srv.Restart(t)
	checkSameOrderEachOnce(t, map[string][]event{"durable": received.wait(t), "ordered": received2.wait(t)}, 0, n)
	closeAndWait(t, fwd)
	closeAndWait(t, durable)
	fs, ds := fwd.Stats(), durable.Stats()
	t.Logf("forwarder %+v; durable %+v; ordered %+v", fs, ds, ordered.Stats())
	if fs.Published != n || fs.Failed != 0 || fs.Frames == 0 || ds.AckFloor != streamLastSeq(t, admin, "EV") {
		t.Fatalf("forwarder %+v, durable %+v: want %d published in frames, each once, and every frame acknowledged", fs, ds, n)
	}
}
