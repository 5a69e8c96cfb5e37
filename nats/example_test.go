package fanoutnats_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type Event struct {
	ID  int    `json:"id"`
	Msg string `json:"msg"`
}

// embeddedServer starts a NATS server inside the process, listening on no
// port (clients connect with nats.InProcessServer), with JetStream in dir.
func embeddedServer(dir string) *server.Server {
	srv, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("NATS server not ready")
	}
	return srv
}

func stop(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

// A broadcaster's values reach the watchers of another process through one
// NATS subscription.
func Example() {
	dir, _ := os.MkdirTemp("", "fanoutnats")
	defer os.RemoveAll(dir)
	srv := embeddedServer(dir)
	defer stop(srv)
	ctx := context.Background()

	// Process B: one subscription feeds a local broadcaster; its watchers
	// each pick their own strategy.
	ncB, _ := nats.Connect("", nats.InProcessServer(srv))
	defer ncB.Close()
	local := fanout.New[Event]()
	w, _ := local.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	sub, err := fanoutnats.Subscribe(ncB, local, fanoutnats.SubscribeConfig[Event]{Subject: "events"})
	if err != nil {
		panic(err)
	}
	defer sub.Close(ctx)

	// Process A: forward everything its broadcaster accepts.
	ncA, _ := nats.Connect("", nats.InProcessServer(srv))
	defer ncA.Close()
	events := fanout.New[Event]()
	fwd, err := fanoutnats.Forward(events, ncA, fanoutnats.ForwardConfig[Event]{Subject: "events"})
	if err != nil {
		panic(err)
	}
	_ = events.Action(Event{1, "disk 91% full"})
	_ = events.Action(Event{2, "disk 95% full"})
	_ = fwd.Close(ctx) // publishes and flushes what was accepted

	for range 2 {
		e, _ := w.Next(ctx)
		fmt.Println(e.ID, e.Msg)
	}
	fmt.Printf("published %d\n", fwd.Stats().Published)
	// Output:
	// 1 disk 91% full
	// 2 disk 95% full
	// published 2
}

// A consumer joining late replays the last values of a JetStream stream,
// then receives the new ones, with no gap between them.
func ExampleConsume() {
	dir, _ := os.MkdirTemp("", "fanoutnats")
	defer os.RemoveAll(dir)
	srv := embeddedServer(dir)
	defer stop(srv)
	ctx := context.Background()
	nc, _ := nats.Connect("", nats.InProcessServer(srv))
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_, _ = js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events"}})
	for i := 1; i <= 5; i++ {
		_, _ = js.Publish(ctx, "events", fmt.Appendf(nil, `{"id":%d}`, i))
	}

	local := fanout.New[Event]()
	w, _ := local.Watch()
	c, err := fanoutnats.Consume(ctx, js, local, fanoutnats.ConsumeConfig[Event]{
		Stream: "EVENTS",
		Start:  fanoutnats.StartLast(2), // or StartNew(), StartAll(), StartAtSequence(n), StartAtTime(t)
	})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	_, _ = js.Publish(ctx, "events", []byte(`{"id":6}`))
	for range 3 {
		e, _ := w.Next(ctx)
		fmt.Println(e.ID)
	}
	// Output:
	// 4
	// 5
	// 6
}

// A recorder writes to a JetStream stream; a write retried after a lost ack
// is stored once.
func ExampleNewSink() {
	dir, _ := os.MkdirTemp("", "fanoutnats")
	defer os.RemoveAll(dir)
	srv := embeddedServer(dir)
	defer stop(srv)
	ctx := context.Background()
	nc, _ := nats.Connect("", nats.InProcessServer(srv))
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_, _ = js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})

	sink, _ := fanoutnats.NewSink(js, fanoutnats.SinkConfig[Event]{Subject: "audit.events"})
	rec, _ := fanout.NewRecorder[Event](fanout.WithRetry(fanoutnats.RetryPolicy()))
	_, _ = rec.StartSink(sink, nil)
	_ = rec.Record(Event{1, "user created"})
	_ = rec.Record(Event{2, "user deleted"})
	_ = rec.Flush(ctx)
	_ = rec.Shutdown(ctx)

	st, _ := js.Stream(ctx, "AUDIT")
	fmt.Println("stored", st.CachedInfo().State.Msgs, "written", rec.Stats().Written)
	// Output: stored 2 written 2
}
