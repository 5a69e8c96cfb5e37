package exporter

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer starts an embedded NATS server with JetStream, listening on no
// port (clients connect in-process), with a stream "EVENTS" capturing
// "events.>" whose messages are at most maxPayload bytes. It is the small
// equivalent of the NATS module's internal natstest package.
func natsServer(t testing.TB) (*server.Server, func() (*nats.Conn, error)) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	connect := func() (*nats.Conn, error) { return nats.Connect("", nats.InProcessServer(srv)) }
	nc, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}}); err != nil {
		t.Fatal(err)
	}
	return srv, connect
}

// streamKeys returns the message IDs stored in the stream, in order.
func streamKeys(t testing.TB, connect func() (*nats.Conn, error)) []string {
	t.Helper()
	nc, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	var keys []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, m.Header.Get(jetstream.MsgIDHeader))
	}
	return keys
}
