package fanoutnats_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// serverAckFloor returns the stream sequence of a durable's ack floor, as
// the server has it.
func serverAckFloor(t *testing.T, js jetstream.JetStream, stream, durable string) uint64 {
	t.Helper()
	cons, err := js.Consumer(guardCtx(t), stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(guardCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.AckFloor.Stream
}

// giveUp closes c with a context that ends soon, and checks that Close
// gave up, for the reason why says: Close waits until the watchers have
// taken what was delivered, which the caller's watchers never will, and
// then acknowledges what they took.
func giveUp(t *testing.T, c *fanoutnats.Consumer[event], why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded: %s", err, why)
	}
	waitDone(t, c)
}

// resumed starts the durable's next consumer and returns the first n values
// it delivers.
func resumed(t *testing.T, srv *natstest.Server, durable string, n int) []int {
	t.Helper()
	b := fanout.New[event]()
	w, _ := b.Watch()
	c := consume(t, natstest.JetStream(t, srv.Connect(t)), b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable})
	got := seqs(recv(t, w, n))
	closeAndWait(t, c)
	if st := c.Stats(); st.Duplicates != 0 {
		t.Errorf("the next consumer skipped %d duplicates", st.Duplicates)
	}
	return got
}

func TestDurableAcknowledgesOnlyWhatEveryLosslessWatcherTook(t *testing.T) {
	srv, js := streamEV(t)
	b := fanout.New[event](fanout.WithQueueLength(64))
	fast, _ := b.Watch()
	slow, _ := b.Watch()
	_, _ = b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull)) // never read
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll()})
	jsPublish(t, js, "ev", events(1, 11)...)
	recv(t, fast, 10)
	recv(t, slow, 4)
	giveUp(t, c, "values were still to be taken")
	if got := serverAckFloor(t, js, "EV", "d"); got != 4 || c.Stats().AckFloor != 4 {
		t.Fatalf("ack floor %d (consumer says %d), want 4: what the slow watcher took", got, c.Stats().AckFloor)
	}
	if got := resumed(t, srv, "d", 6); !slices.Equal(got, []int{5, 6, 7, 8, 9, 10}) {
		t.Fatalf("the next consumer got %v, want 5 to 10", got)
	}
}

func TestWatcherWithCommitHoldsAcknowledgementsUntilItCommits(t *testing.T) {
	for _, read := range []string{"Recv", "ResultChan"} {
		t.Run(read, func(t *testing.T) {
			srv, js := streamEV(t)
			b := fanout.New[event](fanout.WithQueueLength(64))
			w, _ := b.Watch(fanout.WithCommit())
			c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll()})
			jsPublish(t, js, "ev", events(1, 11)...)
			take := func(n int) {
				if read == "Recv" {
					recv(t, w, n)
					return
				}
				for range n {
					<-w.ResultChan()
				}
			}
			take(3)
			w.Commit()
			take(3) // done with, not committed
			giveUp(t, c, "values were still to be taken")
			if got := serverAckFloor(t, js, "EV", "d"); got != 3 {
				t.Fatalf("ack floor %d, want 3: what the watcher committed", got)
			}
			w.Stop() // lets the next consumer's Close go
			if got := resumed(t, srv, "d", 7); !slices.Equal(got, []int{4, 5, 6, 7, 8, 9, 10}) {
				t.Fatalf("the next consumer got %v, want 4 to 10", got)
			}
		})
	}
}

func TestCleanCloseLeavesTheNextConsumerNothingToRedeliver(t *testing.T) {
	srv, js := streamEV(t)
	b := fanout.New[event]()
	w, _ := b.Watch()
	_, _ = b.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull)) // lossy, never read
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll()})
	const n = 500
	jsPublish(t, js, "ev", events(1, n+1)...)
	got := recvAsync(w, n)
	natstest.Eventually(t, "every value delivered", func() bool { return c.Stats().Delivered == n })
	closeAndWait(t, c) // waits until the watcher took them all
	if vals := got.wait(t); vals[n-1].Seq != n {
		t.Fatalf("last value %v", vals[n-1])
	}
	st := c.Stats()
	if floor := serverAckFloor(t, js, "EV", "d"); floor != n || st.AckFloor != n || st.AcksConfirmed != 1 || st.AcksUnconfirmed != 0 {
		t.Fatalf("server ack floor %d, stats %+v: want %d acknowledged and confirmed once", floor, st, n)
	}
	if st.Acks >= n/2 {
		t.Errorf("%d acknowledgements for %d values: not batched", st.Acks, n)
	}
	checkNothingRedelivered(t, srv, js, n)
}

// checkNothingRedelivered stores value last+1 and checks that the next
// consumer of durable "d" begins with it.
func checkNothingRedelivered(t *testing.T, srv *natstest.Server, js jetstream.JetStream, last int) {
	t.Helper()
	jsPublish(t, js, "ev", event{Seq: last + 1})
	if got := resumed(t, srv, "d", 1); got[0] != last+1 {
		t.Fatalf("after Close, the next consumer began with %d, want %d", got[0], last+1)
	}
}

func TestServerRestartMidStreamLeavesNothingToRedeliverAfterClose(t *testing.T) {
	srv, admin := streamEV(t)
	const n = 3000
	out, fwd := jsForwarder(t, srv.Connect(t), 0)
	in := fanout.New[event]()
	ws := []*fanout.Watcher[event]{}
	for range 3 {
		w, _ := in.Watch()
		ws = append(ws, w)
	}
	c := consume(t, natstest.JetStream(t, srv.Connect(t)), in,
		fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll(), AckWait: time.Second})
	go func() {
		for i := range n {
			_ = out.Action(event{Seq: i + 1})
		}
	}()
	var got [][]event
	var wg sync.WaitGroup
	wg.Go(func() { got = recvAll(t, ws, n) })
	natstest.Eventually(t, "a third of the values", func() bool { return c.Stats().Delivered >= n/3 })
	srv.Restart(t)
	wg.Wait()
	closeAndWait(t, c)
	checkSameOrderEachOnce(t, map[string][]event{"stream": streamOrder(t, admin, "EV", n),
		"watcher 0": got[0], "watcher 1": got[1], "watcher 2": got[2]}, 1, n)
	st := c.Stats()
	t.Logf("consumer %+v", st)
	if st.Reconnects == 0 || st.AcksConfirmed < 2 || serverAckFloor(t, admin, "EV", "d") != n {
		t.Fatalf("stats %+v, server ack floor %d: want a reconnect, the floor confirmed after it and at Close, and %d acknowledged",
			st, serverAckFloor(t, admin, "EV", "d"), n)
	}
	closeAndWait(t, fwd)
	checkNothingRedelivered(t, srv, admin, n)
}

func TestCloseCountsAndReportsAnAckFloorTheServerCannotConfirm(t *testing.T) {
	srv, js := streamEV(t)
	b := fanout.New[event]()
	w, _ := b.Watch()
	var log errorLog
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d", Start: fanoutnats.StartAll(),
		OnError: log.add})
	jsPublish(t, js, "ev", events(1, 6)...)
	recv(t, w, 5)
	natstest.Eventually(t, "the acknowledgement", func() bool { return c.Stats().AckFloor == 5 })
	srv.Shutdown()
	giveUp(t, c, "the server is down")
	errs := log.list()
	var fe *fanoutnats.Error
	if st := c.Stats(); st.AcksUnconfirmed != 1 || len(errs) == 0 || !errors.Is(errs[len(errs)-1], fanoutnats.ErrAckUnconfirmed) ||
		!errors.As(errs[len(errs)-1], &fe) || fe.Sequence != 5 {
		t.Fatalf("stats %+v, reported %v: want the floor 5 counted and reported as unconfirmed", st, errs)
	}
}
