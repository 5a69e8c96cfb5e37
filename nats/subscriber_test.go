package fanoutnats_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func publishJSON(t *testing.T, nc *nats.Conn, subject string, evs ...event) {
	t.Helper()
	for _, e := range evs {
		data, _ := json.Marshal(e)
		if err := nc.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func events(from, to int) []event {
	out := make([]event, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, event{Seq: i})
	}
	return out
}

func subscribe(t *testing.T, nc *nats.Conn, b *fanout.Broadcaster[event], cfg fanoutnats.SubscribeConfig[event]) *fanoutnats.Subscriber[event] {
	t.Helper()
	s, err := fanoutnats.Subscribe(nc, b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(s, time.Second) })
	return s
}

func TestSubscriberDeliversEveryMessageToEveryLocalWatcher(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	var ws []*fanout.Watcher[event]
	for range 10 {
		w, _ := b.Watch()
		ws = append(ws, w)
	}
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev.>"})
	const n = 500
	publishJSON(t, srv.Connect(t), "ev.x", events(0, n)...)
	for i, got := range recvAll(t, ws, n) {
		for j, e := range got {
			if e.Seq != j {
				t.Fatalf("watcher %d: value %d has seq %d", i, j, e.Seq)
			}
		}
	}
	closeAndWait(t, s)
	if st := s.Stats(); st.Received != n || st.Delivered != n || st.DecodeErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSubscribeRejectsABadSubject(t *testing.T) {
	srv := natstest.New(t)
	if _, err := fanoutnats.Subscribe(srv.Connect(t), fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: "a b"}); err == nil {
		t.Fatal("Subscribe accepted subject \"a b\"")
	}
}

// Buffer sizes the subscriber's channel: above MaxBuffer (here
// math.MaxInt, which make cannot allocate) it is an error naming the
// field, not a panic.
func TestSubscribeRejectsABufferAboveMaxBuffer(t *testing.T) {
	srv := natstest.New(t)
	s, err := fanoutnats.Subscribe(srv.Connect(t), fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: "ev", Buffer: math.MaxInt})
	if err == nil {
		closeWithin(s, time.Second)
		t.Fatal("Subscribe accepted Buffer math.MaxInt")
	}
	if !strings.Contains(err.Error(), "SubscribeConfig.Buffer") {
		t.Errorf("error %q does not name SubscribeConfig.Buffer", err)
	}
}

func TestSubscriberCountsGarbageAndGoesOn(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	w, _ := b.Watch()
	var mu sync.Mutex
	var errs []error
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{
		Subject: "ev",
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
	})
	nc := srv.Connect(t)
	publishJSON(t, nc, "ev", event{Seq: 1})
	for _, garbage := range []string{"", "not json", `{"seq":"x"}`, "\xff\xfe"} {
		if err := nc.Publish("ev", []byte(garbage)); err != nil {
			t.Fatal(err)
		}
	}
	publishJSON(t, nc, "ev", event{Seq: 2})
	if got := seqs(recv(t, w, 2)); got[0] != 1 || got[1] != 2 {
		t.Fatalf("watcher got %v, want the two valid values", got)
	}
	closeAndWait(t, s)
	if st := s.Stats(); st.Received != 6 || st.Delivered != 2 || st.DecodeErrors != 4 {
		t.Fatalf("stats %+v, want 6 received, 2 delivered, 4 decode errors", st)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range errs {
		var fe *fanoutnats.Error
		if !errors.Is(err, fanoutnats.ErrDecode) || !errors.As(err, &fe) || fe.Op != "decode" || fe.Subject != "ev" {
			t.Fatalf("OnError got %v, want a decode *Error on ev", err)
		}
	}
	if len(errs) != 4 {
		t.Fatalf("OnError called %d times, want 4", len(errs))
	}
}

func TestSubscriberSurvivesPanickingDecoderAndCallback(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	w, _ := b.Watch()
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{
		Subject: "ev",
		Codec: fanoutnats.Codec[event]{Decode: func(data []byte) (event, error) {
			if string(data) == "boom" {
				panic("decoder bug")
			}
			var e event
			return e, json.Unmarshal(data, &e)
		}},
		OnError: func(error) { panic("callback bug") },
	})
	nc := srv.Connect(t)
	_ = nc.Publish("ev", []byte("boom"))
	publishJSON(t, nc, "ev", event{Seq: 7})
	if got := recv(t, w, 1); got[0].Seq != 7 {
		t.Fatalf("got %v", got)
	}
	if st := s.Stats(); st.DecodeErrors != 1 || st.CallbackPanics != 1 {
		t.Fatalf("stats %+v, want 1 decode error and 1 contained panic", st)
	}
}

func TestSubscribeReportsAPermissionViolation(t *testing.T) {
	srv := natstest.New(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Subscribe: &server.SubjectPermission{Allow: []string{"ev.public", "_INBOX.>"}},
		}}}
	})
	nc := srv.Connect(t, nats.UserInfo("u", "p"))
	b := fanout.New[event]()
	_, err := fanoutnats.Subscribe(nc, b, fanoutnats.SubscribeConfig[event]{Subject: "ev.secret"})
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("Subscribe to a denied subject: %v, want ErrPermissionViolation", err)
	}
	if fanoutnats.Retryable(err) {
		t.Fatal("a permissions violation is classified retryable")
	}
	s := subscribe(t, nc, b, fanoutnats.SubscribeConfig[event]{Subject: "ev.public"})
	closeAndWait(t, s)
}

// blockedWatcher returns a broadcaster whose only watcher waits when full
// and holds one value: the subscriber blocks on the second value until the
// watcher is read.
func blockedWatcher() (*fanout.Broadcaster[event], *fanout.Watcher[event]) {
	b := fanout.New[event](fanout.WithQueueLength(1))
	w, _ := b.Watch()
	return b, w
}

func TestSubscriberCloseDeliversWhatTheClientAlreadyReceived(t *testing.T) {
	srv := natstest.New(t)
	b, w := blockedWatcher()
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev"})
	const n = 50
	publishJSON(t, srv.Connect(t), "ev", events(0, n)...)
	natstest.Eventually(t, "the client to buffer the messages", func() bool { return s.Stats().Pending == n-2 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close(guardCtx(t)) }()
	got := recv(t, w, n)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got[n-1].Seq != n-1 {
		t.Fatalf("last value %v", got[n-1])
	}
	if st := s.Stats(); st.Delivered != n || st.Abandoned != 0 {
		t.Fatalf("stats %+v, want all %d delivered", st, n)
	}
}

func TestSubscriberCloseGivesUpAtItsDeadlineAndCountsTheRest(t *testing.T) {
	srv := natstest.New(t)
	b, _ := blockedWatcher() // never read
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev"})
	const n = 20
	publishJSON(t, srv.Connect(t), "ev", events(0, n)...)
	natstest.Eventually(t, "the client to buffer the messages", func() bool { return s.Stats().Pending == n-2 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	waitDone(t, s)
	st := s.Stats()
	if st.Received != n || st.Delivered != 1 || st.Abandoned != n-1 {
		t.Fatalf("stats %+v, want 1 delivered and %d abandoned of %d", st, n-1, n)
	}
}

// blockedSubscriberWithDrops returns a subscriber with a buffer of 4,
// blocked on the second of two values because its watcher w, which holds
// one, is not read, and whose client then received 100 more messages:
// buffered 4, dropped 96. Nothing has read the subscriber's statistics
// since. It also returns the subscriber's connection.
func blockedSubscriberWithDrops(t *testing.T, log *errorLog) (*fanoutnats.Subscriber[event], *fanout.Watcher[event], *nats.Conn) {
	t.Helper()
	srv := natstest.New(t)
	b, w := blockedWatcher()
	snc := srv.Connect(t)
	s := subscribe(t, snc, b, fanoutnats.SubscribeConfig[event]{Subject: "ev", Buffer: 4, OnError: log.add})
	pnc := srv.Connect(t)
	publishJSON(t, pnc, "ev", events(0, 2)...)
	natstest.Eventually(t, "the subscriber to block on the second value", func() bool { return s.Stats().Received == 2 })
	publishJSON(t, pnc, "ev", events(2, 102)...)
	// The server answers this flush after sending snc the 100 messages:
	// once it returns, the client has buffered or dropped them all.
	if err := snc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s, w, snc
}

// checkDropsReported checks that the 96 messages the client dropped were
// counted and reported.
func checkDropsReported(t *testing.T, st fanoutnats.InboundStats, log *errorLog) {
	t.Helper()
	if st.SlowConsumerDropped != 96 {
		t.Errorf("SlowConsumerDropped = %d, want the client's 96", st.SlowConsumerDropped)
	}
	var reports []string
	for _, err := range log.list() {
		if errors.Is(err, nats.ErrSlowConsumer) {
			reports = append(reports, err.Error())
		}
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "dropped 96 messages") {
		t.Errorf("slow-consumer reports %q, want one of 96 messages", reports)
	}
}

// Close reads the client's drop count before unsubscribing: the client
// forgets it with the subscription, and drops since the last message the
// subscriber took would go uncounted and unreported.
func TestSubscriberCloseCountsAndReportsTheMessagesTheClientDropped(t *testing.T) {
	var log errorLog
	s, w, snc := blockedSubscriberWithDrops(t, &log)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(guardCtx(t)) }()
	natstest.Eventually(t, "Close to unsubscribe", func() bool { return snc.NumSubscriptions() == 0 })
	recv(t, w, 6) // unblock the subscriber: the 2 values, then the 4 buffered
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := s.Stats()
	if st.Delivered != 6 {
		t.Errorf("stats %+v, want 6 delivered", st)
	}
	checkDropsReported(t, st, &log)
}

// The same when Close gives up at once: its context is already done.
func TestSubscriberCloseGivingUpCountsAndReportsTheMessagesTheClientDropped(t *testing.T) {
	var log errorLog
	s, _, _ := blockedSubscriberWithDrops(t, &log)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	waitDone(t, s)
	st := s.Stats()
	if st.Received != 6 || st.Delivered != 1 || st.Abandoned != 5 {
		t.Errorf("stats %+v, want 6 received, 1 delivered, 5 abandoned", st)
	}
	checkDropsReported(t, st, &log)
}

func TestSubscriberStopsWhenTheBroadcasterShutsDown(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev"})
	b.Shutdown()
	publishJSON(t, srv.Connect(t), "ev", event{Seq: 1})
	waitDone(t, s)
	if !errors.Is(s.Err(), fanout.ErrStopped) {
		t.Fatalf("Err = %v, want fanout.ErrStopped", s.Err())
	}
	if st := s.Stats(); st.Failed != 1 {
		t.Fatalf("stats %+v, want the value refused counted as failed", st)
	}
}

func TestSubscriberStopsWhenTheConnectionCloses(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	s := subscribe(t, nc, fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: "ev"})
	nc.Close()
	waitDone(t, s)
	if !errors.Is(s.Err(), nats.ErrConnectionClosed) {
		t.Fatalf("Err = %v, want nats.ErrConnectionClosed", s.Err())
	}
}

// The subscriber learns that its connection closed from the client's
// status events, which the client drops beyond 10 unread. While the
// subscriber waits for a slow watcher, 11 reconnects and the close come:
// the subscriber still ends by itself, having counted each reconnect.
func TestSubscriberEndsWhenTheConnectionClosesAfterManyReconnects(t *testing.T) {
	const reconnects = 11
	srv := natstest.New(t)
	b, w := blockedWatcher()
	snc := srv.Connect(t)
	s := subscribe(t, snc, b, fanoutnats.SubscribeConfig[event]{Subject: "ev"})
	publishJSON(t, srv.Connect(t), "ev", events(0, 2)...)
	natstest.Eventually(t, "the subscriber to block on the second value", func() bool { return s.Stats().Received == 2 })
	for range reconnects {
		before := snc.Reconnects
		srv.Restart(t)
		natstest.Eventually(t, "a reconnect", func() bool { return snc.IsConnected() && snc.Reconnects > before })
	}
	snc.Close()
	recv(t, w, 2) // unblock the subscriber
	waitDone(t, s)
	if !errors.Is(s.Err(), nats.ErrConnectionClosed) {
		t.Errorf("Err = %v, want nats.ErrConnectionClosed", s.Err())
	}
	if st := s.Stats(); st.Reconnects != reconnects {
		t.Errorf("%d reconnects counted, want %d", st.Reconnects, reconnects)
	}
}

// publishFrame publishes a frame of the given payloads by hand.
func publishFrame(t *testing.T, nc *nats.Conn, subject, count string, parts ...[]byte) {
	t.Helper()
	var body []byte
	for _, p := range parts {
		body = binary.AppendUvarint(body, uint64(len(p)))
		body = append(body, p...)
	}
	m := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{fanoutnats.FrameHeader: []string{count}}}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestSubscriberDeliversTheGoodValuesOfAFrameAndCountsTheRest(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	w, _ := b.Watch()
	var errs []error
	s := subscribe(t, srv.Connect(t), b, fanoutnats.SubscribeConfig[event]{Subject: "ev",
		OnError: func(err error) { errs = append(errs, err) }})
	nc := srv.Connect(t)
	publishFrame(t, nc, "ev", "3", []byte(`{"seq":1}`), []byte("garbage"), []byte(`{"seq":2}`))
	publishFrame(t, nc, "ev", "5", []byte(`{"seq":3}`), []byte(`{"seq":4}`)) // the header says 5
	publishJSON(t, nc, "ev", event{Seq: 5})
	if got := seqs(recv(t, w, 3)); !slices.Equal(got, []int{1, 2, 5}) {
		t.Fatalf("got %v, want 1 2 5", got)
	}
	closeAndWait(t, s)
	if st := s.Stats(); st.Received != 5 || st.Delivered != 3 || st.DecodeErrors != 2 || st.Frames != 2 {
		t.Fatalf("stats %+v: want 5 received (3 + 1 malformed frame + 1), 3 delivered, 2 decode errors, 2 frames", st)
	}
	if len(errs) != 2 || !errors.Is(errs[0], fanoutnats.ErrDecode) || !errors.Is(errs[1], fanoutnats.ErrDecode) ||
		!strings.Contains(errs[0].Error(), "value 2 of 3") || !strings.Contains(errs[1].Error(), "malformed frame") {
		t.Fatalf("OnError got %v", errs)
	}
}

// Subscribe and Consume refuse a subject no subscription can have (empty,
// white space, an empty token, > before the last token) with an error of
// their own, and the caller's connection stays open: sent to the server,
// such a subject made the client close the connection ("ev.>.x"), or, as
// a consumer's filter, meant every subject of the stream ("").
func TestSubscribeAndConsumeRefuseAnInvalidFilterSubjectAndKeepTheConnection(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	natstest.Stream(t, js, "EV", "ev", "ev.>")
	for _, subject := range []string{"", "ev.>.x", "ev..x", "ev x", ">.ev"} {
		_, err := fanoutnats.Subscribe(nc, fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: subject})
		if err == nil || !strings.Contains(err.Error(), "SubscribeConfig.Subject") {
			t.Errorf("Subscribe(%q) = %v, want an error naming SubscribeConfig.Subject", subject, err)
		}
		_, err = fanoutnats.Consume(guardCtx(t), js, fanout.New[event](), fanoutnats.ConsumeConfig[event]{Stream: "EV", FilterSubjects: []string{"ev", subject}})
		if err == nil || !strings.Contains(err.Error(), "ConsumeConfig.FilterSubjects") {
			t.Errorf("Consume(FilterSubjects %q) = %v, want an error naming ConsumeConfig.FilterSubjects", subject, err)
		}
	}
	if nc.IsClosed() {
		t.Fatalf("the caller's connection was closed: %v", nc.LastError())
	}
	for _, subject := range []string{"ev", "ev.*", "ev.>", "*.x", ">"} {
		s, err := fanoutnats.Subscribe(nc, fanout.New[event](), fanoutnats.SubscribeConfig[event]{Subject: subject})
		if err != nil {
			t.Errorf("Subscribe(%q): %v", subject, err)
			continue
		}
		closeWithin(s, time.Second)
	}
}
