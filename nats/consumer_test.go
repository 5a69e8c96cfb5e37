package fanoutnats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsPublish stores events in the stream capturing subject, one by one,
// waiting for each ack.
func jsPublish(t *testing.T, js jetstream.JetStream, subject string, evs ...event) {
	t.Helper()
	for _, e := range evs {
		data, _ := json.Marshal(e)
		if _, err := js.Publish(guardCtx(t), subject, data); err != nil {
			t.Fatal(err)
		}
	}
}

func consume(t *testing.T, js jetstream.JetStream, b *fanout.Broadcaster[event], cfg fanoutnats.ConsumeConfig[event]) *fanoutnats.Consumer[event] {
	t.Helper()
	c, err := fanoutnats.Consume(guardCtx(t), js, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(c, time.Second) })
	return c
}

func TestConsumerStartsWhereItsStartSays(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	jsPublish(t, js, "ev", events(1, 6)...)
	mid := time.Now()
	jsPublish(t, js, "ev", events(6, 11)...)
	tests := []struct {
		name  string
		start fanoutnats.Start
		want  []int // before the live value 11
	}{
		{"new", fanoutnats.StartNew(), nil},
		{"zero", fanoutnats.Start{}, nil},
		{"all", fanoutnats.StartAll(), []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"sequence", fanoutnats.StartAtSequence(4), []int{4, 5, 6, 7, 8, 9, 10}},
		{"time", fanoutnats.StartAtTime(mid), []int{6, 7, 8, 9, 10}},
		{"last 3", fanoutnats.StartLast(3), []int{8, 9, 10}},
		{"last 0", fanoutnats.StartLast(0), nil},
		{"last 100", fanoutnats.StartLast(100), []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
	}
	type start struct {
		c *fanoutnats.Consumer[event]
		w *fanout.Watcher[event]
	}
	var started []start
	for _, tt := range tests {
		for _, durable := range []string{"", "d-" + tt.name[:min(len(tt.name), 4)] + fmt.Sprint(len(started))} {
			b := fanout.New[event](fanout.WithQueueLength(64))
			w, _ := b.Watch()
			c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, Start: tt.start})
			started = append(started, start{c, w})
		}
	}
	jsPublish(t, js, "ev", event{Seq: 11})
	for i, s := range started {
		tt := tests[i/2]
		want := append(slices.Clone(tt.want), 11)
		if got := seqs(recv(t, s.w, len(want))); !slices.Equal(got, want) {
			t.Errorf("%s (durable %v): got %v, want %v", tt.name, i%2 == 1, got, want)
		}
		closeAndWait(t, s.c)
	}
}

func TestConsumeRejectsAMissingStream(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	_, err := fanoutnats.Consume(guardCtx(t), js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "NOPE"})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Consume on a missing stream: %v, want ErrStreamNotFound", err)
	}
}

func TestConsumeWithoutAStreamNamesTheField(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	_, err := fanoutnats.Consume(guardCtx(t), js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{})
	if err == nil || !strings.Contains(err.Error(), "ConsumeConfig.Stream") {
		t.Fatalf("Consume without a stream: %v, want an error naming ConsumeConfig.Stream", err)
	}
}

func TestConsumeRejectsADurableThatDoesNotAcknowledgeWithAckAll(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	jsPublish(t, js, "ev", events(1, 4)...)
	explicit, err := js.CreateConsumer(guardCtx(t), "EV", jetstream.ConsumerConfig{Durable: "explicit", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := explicit.Fetch(2)
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if err := m.DoubleAck(guardCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(guardCtx(t), "EV", jetstream.ConsumerConfig{Durable: "none", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	for durable, want := range map[string]string{"explicit": "StartAtSequence(3)", "none": "AckAll"} {
		_, err := fanoutnats.Consume(guardCtx(t), js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Consume of durable %q: %v, want an error saying %s", durable, err, want)
		}
	}
}

func TestDurableConsumerResumesWhatACrashedProcessWatchersDidNotTake(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	natstest.Stream(t, js, "EV", "ev")
	b, w := blockedWatcher() // a queue of one value
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "proc", Start: fanoutnats.StartAll()})
	jsPublish(t, js, "ev", events(1, 11)...)
	if got := recv(t, w, 1); got[0].Seq != 1 { // the watcher takes 1; 2 waits in its queue
		t.Fatalf("got %v", got)
	}
	natstest.Eventually(t, "the consumer to block on value 3", func() bool { return c.Stats().Received == 3 })
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Close(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v", err)
	}
	waitDone(t, c)
	if st := c.Stats(); st.Delivered != 2 || st.Abandoned != 1 || st.AckFloor != 1 {
		t.Fatalf("stats %+v, want 2 delivered, 1 abandoned, stream sequence 1 acknowledged", st)
	}
	if err := nc.Flush(); err != nil { // the ack of value 1 has reached the server
		t.Fatal(err)
	}

	// The next process, on its own connection, gets 2 (delivered, never
	// taken) to 10 in order.
	js2 := natstest.JetStream(t, srv.Connect(t))
	b2 := fanout.New[event]()
	w2, _ := b2.Watch()
	c2 := consume(t, js2, b2, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "proc"})
	if got, want := seqs(recv(t, w2, 9)), []int{2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("after the crash: got %v, want %v", got, want)
	}
	closeAndWait(t, c2)
}

func TestDurableConsumerSkipsRedeliveriesOfValuesItDelivered(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b, w := blockedWatcher()
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{
		Stream: "EV", Durable: "slow", Start: fanoutnats.StartAll(), AckWait: 100 * time.Millisecond,
	})
	jsPublish(t, js, "ev", events(1, 4)...)
	// Value 2 is held, unacknowledged, past AckWait: the server redelivers
	// it (and 3) while the first copies are still to be delivered.
	natstest.Eventually(t, "a redelivery", func() bool {
		info, err := js.Consumer(guardCtx(t), "EV", "slow")
		if err != nil {
			return false
		}
		ci, err := info.Info(guardCtx(t))
		return err == nil && ci.NumRedelivered > 0
	})
	if got := seqs(recv(t, w, 3)); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("got %v, want 1 2 3", got)
	}
	jsPublish(t, js, "ev", event{Seq: 4})
	if got := recv(t, w, 1); got[0].Seq != 4 {
		t.Fatalf("after the redeliveries got %v, want 4: a value was delivered twice", got)
	}
	natstest.Eventually(t, "4 delivered", func() bool { return c.Stats().Delivered == 4 })
	if st := c.Stats(); st.Duplicates == 0 {
		t.Fatalf("stats %+v, want the redeliveries counted as duplicates", st)
	}
}

func TestDurableConsumerRepairsAGapInItsDeliveries(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b := fanout.New[event](fanout.WithQueueLength(1000))
	w, _ := b.Watch()
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "gap", Start: fanoutnats.StartAll()})

	// Another client pulls one message of the same durable and never
	// acknowledges it: for the consumer, a delivery lost on the way.
	thiefConn := srv.Connect(t)
	thief, err := natstest.JetStream(t, thiefConn).Consumer(guardCtx(t), "EV", "gap")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := thief.Fetch(1, jetstream.FetchMaxWait(hangGuard))
	if err != nil {
		t.Fatal(err)
	}
	if err := thiefConn.Flush(); err != nil {
		t.Fatal(err)
	}
	stolen := make(chan struct{})
	go func() {
		for range batch.Messages() {
		}
		close(stolen)
	}()
	n := 0
	for stole := false; !stole; {
		n++
		jsPublish(t, js, "ev", event{Seq: n})
		select {
		case <-stolen:
			stole = true
		default:
		}
	}
	jsPublish(t, js, "ev", events(n+1, n+6)...)
	n += 5
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if got := seqs(recv(t, w, n)); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if st := c.Stats(); st.Resets == 0 {
		t.Fatalf("stats %+v, want a reset", st)
	}
}

func TestConsumerTerminatesUndecodableMessagesAndGoesOn(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	var errs []error
	for _, durable := range []string{"", "d"} {
		b := fanout.New[event]()
		w, _ := b.Watch()
		c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, Start: fanoutnats.StartAll(),
			OnError: func(err error) { errs = append(errs, err) }})
		if durable == "" {
			if _, err := js.Publish(guardCtx(t), "ev", []byte("garbage")); err != nil {
				t.Fatal(err)
			}
			jsPublish(t, js, "ev", event{Seq: 1})
		}
		if got := recv(t, w, 1); got[0].Seq != 1 {
			t.Fatalf("durable %q: got %v", durable, got)
		}
		closeAndWait(t, c)
		if st := c.Stats(); st.DecodeErrors != 1 || st.Delivered != 1 {
			t.Fatalf("durable %q: stats %+v", durable, st)
		}
	}
	if len(errs) != 2 || !errors.Is(errs[0], fanoutnats.ErrDecode) || !errors.Is(errs[1], fanoutnats.ErrDecode) {
		t.Fatalf("OnError got %v, want two decode errors", errs)
	}
	var fe *fanoutnats.Error
	if !errors.As(errs[1], &fe) || fe.Sequence != 1 {
		t.Fatalf("the decode error %v does not name stream sequence 1", errs[1])
	}
	// Terminated, the garbage is not redelivered to the durable.
	b := fanout.New[event]()
	w, _ := b.Watch()
	consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d"})
	jsPublish(t, js, "ev", event{Seq: 2})
	if got := recv(t, w, 1); got[0].Seq != 2 {
		t.Fatalf("the durable's next consumer got %v, want only the new value", got)
	}
}

func TestConsumerStopsWhenTheBroadcasterShutsDownLeavingTheValueUnacknowledged(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b := fanout.New[event]()
	// An hour's AckWait: only the consumer's negative acknowledgement of
	// the refused value lets the next consumer have it within the test.
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", AckWait: time.Hour})
	b.Shutdown()
	jsPublish(t, js, "ev", event{Seq: 1})
	waitDone(t, c)
	if !errors.Is(c.Err(), fanout.ErrStopped) || c.Stats().Failed != 1 {
		t.Fatalf("Err = %v, stats %+v: want ErrStopped and one failed value", c.Err(), c.Stats())
	}
	b2 := fanout.New[event]()
	w2, _ := b2.Watch()
	consume(t, js, b2, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d"})
	if got := recv(t, w2, 1); got[0].Seq != 1 {
		t.Fatalf("the refused value was not redelivered: got %v", got)
	}
}

func TestConsumerStopsWhenTheConnectionCloses(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	natstest.Stream(t, js, "EV", "ev")
	for _, durable := range []string{"", "d"} {
		nc := srv.Connect(t)
		c := consume(t, natstest.JetStream(t, nc), fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable})
		nc.Close()
		waitDone(t, c)
		if !errors.Is(c.Err(), nats.ErrConnectionClosed) {
			t.Fatalf("durable %q: Err = %v, want nats.ErrConnectionClosed", durable, c.Err())
		}
	}
}

// publishUntilStored publishes e to the stream of subject ev, again and
// again while the server is away (restarting).
func publishUntilStored(t *testing.T, js jetstream.JetStream, e event) {
	t.Helper()
	data, _ := json.Marshal(e)
	natstest.Eventually(t, fmt.Sprintf("event %d stored", e.Seq), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Publish(ctx, "ev", data)
		return err == nil
	})
}

// An ordered consumer with StartNew delivers every value stored after
// Consume returned, also when the server restarts before its first
// delivery: the NATS client recreates an ordered consumer that has
// delivered nothing with its first deliver policy, and "new" then skipped
// what was stored meanwhile, counted nowhere.
func TestOrderedConsumerStartNewKeepsWhatIsStoredBeforeItsFirstReset(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, admin, "EV", "ev")
	jsPublish(t, admin, "ev", event{Seq: 0}) // before Consume: not delivered
	js := natstest.JetStream(t, srv.Connect(t, nats.ReconnectWait(500*time.Millisecond)))
	b := fanout.New[event](fanout.WithQueueLength(64))
	w, _ := b.Watch()
	consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Start: fanoutnats.StartNew()})
	srv.Restart(t) // the ordered consumer, in memory, is gone
	publishUntilStored(t, admin, event{Seq: 1})
	natstest.Eventually(t, "the client to recreate its ordered consumer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := admin.Stream(ctx, "EV")
		return err == nil && st.CachedInfo().State.Consumers > 0
	})
	publishUntilStored(t, admin, event{Seq: 2})
	if got := seqs(recv(t, w, 2)); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("got %v, want [1 2]", got)
	}
}

// StartLast(n) replays the last n messages the stream holds, not the last
// n sequence numbers: with 8 and 9 deleted, StartLast(3) of 1..10 replays
// 6, 7 and 10 (it replayed 10 alone).
func TestStartLastCountsMessagesNotSequences(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	st := natstest.Stream(t, admin, "EV", "ev")
	jsPublish(t, admin, "ev", events(1, 11)...)
	for _, seq := range []uint64{8, 9} {
		if err := st.DeleteMsg(guardCtx(t), seq); err != nil {
			t.Fatal(err)
		}
	}
	checkStartLast(t, admin, 3, event{Seq: 11}, []int{6, 7, 10, 11})
}

// checkStartLast consumes stream EV with StartLast(n), ordered and
// durable, publishes next, and checks that each consumer delivers want.
func checkStartLast(t *testing.T, admin jetstream.JetStream, n uint64, next event, want []int) {
	t.Helper()
	var ws []*fanout.Watcher[event]
	for _, durable := range []string{"", "d"} {
		b := fanout.New[event](fanout.WithQueueLength(64))
		w, _ := b.Watch()
		consume(t, admin, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, Start: fanoutnats.StartLast(n)})
		ws = append(ws, w)
	}
	jsPublish(t, admin, "ev", next)
	for i, w := range ws {
		if got := seqs(recv(t, w, len(want))); !slices.Equal(got, want) {
			t.Errorf("durable %v: got %v, want %v", i == 1, got, want)
		}
	}
}

// StartLast(n) on a stream that holds nothing, having held messages (purged,
// or all expired: its first sequence is then one past its last), starts
// with the next message stored, ordered or durable (it started at a
// sequence wrapped around below zero, and delivered nothing ever after).
func TestStartLastOnAPurgedStreamStartsWithTheNextMessage(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	st := natstest.Stream(t, admin, "EV", "ev")
	jsPublish(t, admin, "ev", events(1, 6)...)
	if err := st.Purge(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkStartLast(t, admin, 10, event{Seq: 6}, []int{6})
}

// A durable that an operator deletes while Consume runs ends the consumer,
// and Err says why: the consumer was deleted (it said only that the
// messages iterator had closed).
func TestDurableConsumerDeletedByAnOperatorStopsWithErrConsumerDeleted(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, admin, "EV", "ev")
	c := durableAtWork(t, srv, admin)
	if err := admin.DeleteConsumer(guardCtx(t), "EV", "d"); err != nil {
		t.Fatal(err)
	}
	waitDone(t, c)
	if !errors.Is(c.Err(), jetstream.ErrConsumerDeleted) {
		t.Fatalf("Err = %v, want jetstream.ErrConsumerDeleted", c.Err())
	}
}

// A durable whose stream is gone when the consumer resets it after a
// reconnect (a memory stream does not survive a server restart) ends the
// consumer with the reason in Err. The reset of a consumer that does not
// exist gets no answer, and the consumer tried it again for ever, every
// DefaultTimeout, with Err nil.
func TestDurableConsumerWhoseStreamIsGoneAfterARestartStopsWithTheReason(t *testing.T) {
	srv := natstest.New(t)
	admin := natstest.JetStream(t, srv.Connect(t))
	if _, err := admin.CreateStream(guardCtx(t), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	c := durableAtWork(t, srv, admin)
	srv.Restart(t) // the memory stream, and its durable, are gone
	waitDone(t, c)
	if !errors.Is(c.Err(), jetstream.ErrStreamNotFound) {
		t.Fatalf("Err = %v, want jetstream.ErrStreamNotFound", c.Err())
	}
}

// durableAtWork starts a consumer of durable d of stream EV (subject ev),
// into a broadcaster of its own, publishes 4 values and returns once a
// watcher has received 3 of them: a durable in use.
func durableAtWork(t *testing.T, srv *natstest.Server, admin jetstream.JetStream) *fanoutnats.Consumer[event] {
	t.Helper()
	b := fanout.New[event](fanout.WithQueueLength(64))
	w, _ := b.Watch()
	c := consume(t, natstest.JetStream(t, srv.Connect(t)), b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d"})
	jsPublish(t, admin, "ev", events(1, 4)...)
	recv(t, w, 3)
	return c
}

// An existing durable that filters other subjects than
// ConsumeConfig.FilterSubjects is refused, as one that does not acknowledge
// with AckAll is: it was resumed with its old filters, and delivered values
// of subjects the configuration did not ask for. The same filters, in any
// order, resume it.
func TestConsumeRejectsADurableFilteringOtherSubjects(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev.*")
	for _, filters := range [][]string{{"ev.a"}, {"ev.a", "ev.b"}} {
		durable := fmt.Sprint("d", len(filters))
		closeAndWait(t, consume(t, js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, FilterSubjects: filters}))
		again := slices.Clone(filters)
		slices.Reverse(again)
		closeAndWait(t, consume(t, js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, FilterSubjects: again}))
		for _, other := range [][]string{{"ev.c"}, nil, append(slices.Clone(filters), "ev.c")} {
			c, err := fanoutnats.Consume(guardCtx(t), js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, FilterSubjects: other})
			if err == nil {
				closeAndWait(t, c)
				t.Fatalf("Consume of durable filtering %q with FilterSubjects %q: no error", filters, other)
			}
			if !strings.Contains(err.Error(), "FilterSubjects") {
				t.Fatalf("error %q does not name FilterSubjects", err)
			}
		}
	}
}

// A redelivery a durable consumer skips is counted as its first delivery
// was: a frame that does not parse as one value (not as the count its
// header claims), and its payload bytes in Bytes.
func TestDurableCountsASkippedRedeliveryAsItsFirstDelivery(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b, w := blockedWatcher()
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{
		Stream: "EV", Durable: "d", Start: fanoutnats.StartAll(), AckWait: 100 * time.Millisecond,
	})
	jsPublish(t, js, "ev", events(1, 3)...) // 1 is queued, 2 waits for room
	bad := &nats.Msg{Subject: "ev", Header: nats.Header{fanoutnats.FrameHeader: []string{"5"}}, Data: []byte("xxxxxx")}
	if _, err := js.PublishMsg(guardCtx(t), bad); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(guardCtx(t), "EV", "d")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the three redelivered", func() bool {
		ci, err := cons.Info(guardCtx(t))
		return err == nil && ci.Delivered.Consumer >= 6
	})
	recv(t, w, 2)
	natstest.Eventually(t, "the redeliveries skipped", func() bool { return c.Stats().Duplicates > 0 && c.Stats().DecodeErrors == 1 })
	closeAndWait(t, c)
	st := c.Stats()
	ci, err := cons.Info(guardCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Received > ci.Delivered.Consumer {
		t.Errorf("Received %d values (Duplicates %d) from %d deliveries of two values and a frame that does not parse",
			st.Received, st.Duplicates, ci.Delivered.Consumer)
	}
	one, _ := json.Marshal(event{Seq: 1})
	if want := (st.Received-st.Frames)*uint64(len(one)) + st.Frames*uint64(len(bad.Data)); st.Bytes != want {
		t.Errorf("Bytes %d after %d values received (%d frames): want %d, the redeliveries' payloads included", st.Bytes, st.Received, st.Frames, want)
	}
}
