package fanoutnats_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterReader is a durable consumer of a replicated stream feeding two
// lossless watchers.
type clusterReader struct {
	c    *fanoutnats.Consumer[event]
	read *pending[[]event]
}

func TestStreamLeaderShutdownMidStreamLosesAndDuplicatesNothing(t *testing.T) {
	n := 6000
	if testing.Short() {
		n = 2000
	}
	cl := natstest.NewCluster(t, 3)
	admin := natstest.JetStream(t, cl.Connect(t, 0))
	if _, err := admin.CreateStream(guardCtx(t), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev"},
		Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader(t, "EV")
	// Every client connects to the leader first: its shutdown makes each
	// of them reconnect.
	out := fanout.New[event](fanout.WithQueueLength(256))
	var retried atomic.Uint64 // the failed attempts reported, to be retried
	fwd, err := fanoutnats.Forward(out, cl.Connect(t, leader), fanoutnats.ForwardConfig[event]{
		Subject: "ev", JetStream: true, Batch: 64, AckTimeout: time.Second, RetryWait: 50 * time.Millisecond,
		OnError: func(err error) {
			if strings.Contains(err.Error(), "will retry") {
				retried.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(fwd, time.Second) })
	var readers []clusterReader
	for _, durable := range []string{"a", "b"} {
		in := fanout.New[event]()
		w1, _ := in.Watch()
		w2, _ := in.Watch()
		c := consume(t, natstest.JetStream(t, cl.Connect(t, leader)), in,
			fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: durable, Start: fanoutnats.StartAll()})
		readers = append(readers, clusterReader{c: c, read: recvAllAsync([]*fanout.Watcher[event]{w1, w2}, n, 2*time.Minute)})
	}
	go func() {
		for i := range n {
			if out.Action(event{Seq: i}) != nil {
				return
			}
		}
	}()
	// Mid-stream: the forwarder has two thirds to publish, the consumers
	// more.
	natstest.Eventually(t, "a third of the values", func() bool { return fwd.Stats().Published >= uint64(n/3) })
	cl.Shutdown(leader)
	t.Logf("stream leader n%d shut down after %d values published", leader, fwd.Stats().Published)

	got := map[string][]event{}
	for r, rd := range readers {
		for i, evs := range rd.read.wait(t) {
			got[fmt.Sprintf("consumer %d, watcher %d", r, i)] = evs
		}
	}
	checkSameOrderEachOnce(t, got, 0, n)
	// Close stays bounded, and confirms the floor, with a node down.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fwd.Close(ctx); err != nil {
		t.Fatalf("forwarder Close: %v", err)
	}
	fs := fwd.Stats()
	t.Logf("forwarder %+v", fs)
	if fs.Published != uint64(n) || fs.Failed != 0 || fs.Retries != retried.Load() {
		t.Fatalf("forwarder %+v, %d retries reported: want %d published, none failed, every retry counted", fs, retried.Load(), n)
	}
	for r, rd := range readers {
		if err := rd.c.Close(ctx); err != nil {
			t.Fatalf("consumer %d Close: %v", r, err)
		}
		st := rd.c.Stats()
		t.Logf("consumer %d %+v", r, st)
		if st.Reconnects == 0 || st.AckFloor != uint64(n) || st.AcksConfirmed == 0 {
			t.Fatalf("consumer %d %+v: want a reconnect counted and all %d values acknowledged, confirmed", r, st, n)
		}
	}
	st, err := admin.Stream(guardCtx(t), "EV")
	if err != nil {
		t.Fatal(err)
	}
	if msgs := st.CachedInfo().State.Msgs; msgs != uint64(n) {
		t.Fatalf("the stream holds %d messages, want %d: each once", msgs, n)
	}
}
