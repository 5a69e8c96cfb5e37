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

// exampleServer starts an embedded server with JetStream in a temporary
// directory; done stops it and removes the directory.
func exampleServer() (srv *server.Server, done func()) {
	dir, _ := os.MkdirTemp("", "fanoutnats")
	srv = embeddedServer(dir)
	return srv, func() { stop(srv); os.RemoveAll(dir) }
}

// publishIDs stores the events of IDs 1 to n on subject.
func publishIDs(js jetstream.JetStream, subject string, n int) {
	for i := 1; i <= n; i++ {
		_, _ = js.Publish(context.Background(), subject, fmt.Appendf(nil, `{"id":%d}`, i))
	}
}

// exampleStream connects to srv and creates the stream name capturing
// subjects; done closes the connection.
func exampleStream(srv *server.Server, name string, subjects ...string) (js jetstream.JetStream, done func()) {
	nc, _ := nats.Connect("", nats.InProcessServer(srv))
	js, _ = jetstream.New(nc)
	_, _ = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: subjects})
	return js, nc.Close
}

// A broadcaster's values reach the watchers of another process through one
// NATS subscription.
func Example() {
	srv, done := exampleServer()
	defer done()
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
	srv, done := exampleServer()
	defer done()
	ctx := context.Background()
	js, closeJS := exampleStream(srv, "EVENTS", "events")
	defer closeJS()
	publishIDs(js, "events", 5)

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
	srv, done := exampleServer()
	defer done()
	ctx := context.Background()
	js, closeJS := exampleStream(srv, "AUDIT", "audit.>")
	defer closeJS()

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

// A durable consumer acknowledges a value once every lossless watcher has
// taken it; a watcher registered WithCommit takes it when it commits, so
// that a crash before the work is done makes the durable's next consumer
// deliver it again.
func ExampleConsume_durable() {
	srv, done := exampleServer()
	defer done()
	ctx := context.Background()
	js, closeJS := exampleStream(srv, "EVENTS", "events")
	defer closeJS()
	publishIDs(js, "events", 3)

	local := fanout.New[Event]()
	w, _ := local.Watch(fanout.WithCommit())
	c, err := fanoutnats.Consume(ctx, js, local, fanoutnats.ConsumeConfig[Event]{
		Stream: "EVENTS", Durable: "audit-writer", Start: fanoutnats.StartAll(),
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		e, _ := w.Next(ctx)
		fmt.Println("written", e.ID) // the watcher's work
		w.Commit()                   // done with everything received so far
	}
	if err := c.Close(ctx); err != nil { // waits for the commits, confirms the ack floor
		panic(err)
	}
	fmt.Println("acknowledged up to stream sequence", c.Stats().AckFloor)
	// Output:
	// written 1
	// written 2
	// written 3
	// acknowledged up to stream sequence 3
}

// A forwarder packs the values it finds queued into frames: one NATS
// message for many values, delivered into the receiving broadcaster as one
// batch.
func ExampleForwardConfig_frame() {
	srv, done := exampleServer()
	defer done()
	ctx := context.Background()

	ncB, _ := nats.Connect("", nats.InProcessServer(srv))
	defer ncB.Close()
	local := fanout.New[Event]()
	w, _ := local.Watch()
	sub, _ := fanoutnats.Subscribe(ncB, local, fanoutnats.SubscribeConfig[Event]{Subject: "events"})

	ncA, _ := nats.Connect("", nats.InProcessServer(srv))
	defer ncA.Close()
	events := fanout.New[Event](fanout.WithQueueLength(1000))
	fwd, _ := fanoutnats.Forward(events, ncA, fanoutnats.ForwardConfig[Event]{Subject: "events", Batch: 1000, Frame: 100})
	batch := make([]Event, 1000)
	for i := range batch {
		batch[i] = Event{ID: i}
	}
	_, _ = events.ActionBatch(batch) // queued at once: the forwarder finds full frames
	_ = fwd.Close(ctx)

	sum := 0
	for range 1000 {
		e, _ := w.Next(ctx)
		sum += e.ID
	}
	_ = sub.Close(ctx)
	st := fwd.Stats()
	fmt.Println(st.Published, "values in", st.Frames, "frames; sum", sum)
	// Output: 1000 values in 10 frames; sum 499500
}
