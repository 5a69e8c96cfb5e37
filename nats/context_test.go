package fanoutnats_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
)

// A nil context is an error wherever one is taken, never "no bound": the
// call does nothing, and the same call with a real context then works.
func TestANilContextIsAnErrorThatChangesNothing(t *testing.T) {
	var nilCtx context.Context
	isNilCtxErr := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "nil context") {
			t.Fatalf("%s with a nil context: %v, want a nil context error", what, err)
		}
	}
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b := fanout.New[event]()
	defer b.Shutdown()

	_, err := fanoutnats.Consume(nilCtx, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV"})
	isNilCtxErr("Consume", err)
	c := consume(t, js, b, fanoutnats.ConsumeConfig[event]{Stream: "EV"})
	isNilCtxErr("Consumer.Close", c.Close(nilCtx))

	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "core"})
	isNilCtxErr("Subscriber.Close", s.Close(nilCtx))

	// Not a subject of the stream c consumes: c would bring the value back
	// into b, and f would forward it again.
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "fwd"})
	if err != nil {
		t.Fatal(err)
	}
	isNilCtxErr("Forwarder.Close", f.Close(nilCtx))
	if err := b.Action(event{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	closeAndWait(t, f) // still open after Close(nil): it forwards the value
	if st := f.Stats(); st.Published != 1 {
		t.Fatalf("forwarder stats %+v, want the value published", st)
	}

	sink, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{Subject: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sink.Create(nilCtx, event{Seq: 2})
	isNilCtxErr("Sink.Create", err)
}

// Close is idempotent: once a bridge has closed, Close again returns nil,
// even with a context that has already ended (it has nothing left to give
// up). It chose at random between the closed Done channel and the ended
// context, and returned ctx.Err() about half the time.
func TestCloseAgainAfterACleanCloseReturnsNilEvenWithAnEndedContext(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	natstest.Stream(t, js, "EV", "ev")
	f, err := fanoutnats.Forward(fanout.New[event](), nc, fanoutnats.ForwardConfig[event]{Subject: "fwd"})
	if err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, nc, fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: "core"})
	c := consume(t, js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d"})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, b := range map[string]closer{"Forwarder": f, "Subscriber": s, "Consumer": c} {
		closeAndWait(t, b)
		for i := range 100 {
			if err := b.Close(ended); err != nil {
				t.Fatalf("%s: Close #%d after a clean Close, with an ended context: %v, want nil", name, i+2, err)
			}
		}
	}
}
