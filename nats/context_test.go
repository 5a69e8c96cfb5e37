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
