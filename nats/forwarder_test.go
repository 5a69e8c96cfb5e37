package fanoutnats_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawSub subscribes to subject with a plain NATS subscription, as a
// remote consumer that does not use this package.
func rawSub(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

func nextEvents(t *testing.T, sub *nats.Subscription, n int) []event {
	t.Helper()
	out := make([]event, 0, n)
	for len(out) < n {
		m, err := sub.NextMsg(hangGuard)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		var e event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatalf("message %q: %v", m.Data, err)
		}
		out = append(out, e)
	}
	return out
}

func TestForwarderPublishesEveryValueInOrder(t *testing.T) {
	srv := natstest.New(t)
	sub := rawSub(t, srv.Connect(t), "ev")
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if err := b.Action(event{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	got := nextEvents(t, sub, n)
	for i, e := range got {
		if e.Seq != i {
			t.Fatalf("message %d has seq %d: order not kept", i, e.Seq)
		}
	}
	closeAndWait(t, f)
	st := f.Stats()
	if st.Received != n || st.Published != n || st.Failed != 0 || st.Flushes == 0 || st.Flushes > n {
		t.Fatalf("stats %+v, want %d received and published, batched flushes", st, n)
	}
	if f.Err() != nil {
		t.Fatalf("Err after Close = %v, want nil", f.Err())
	}
}

func TestForwardRejectsAMissingSubject(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	for _, subject := range []string{"", "a.*", "a b", "a..b"} {
		_, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: subject})
		if !errors.Is(err, fanoutnats.ErrInvalidSubject) {
			t.Errorf("subject %q: %v, want ErrInvalidSubject", subject, err)
		}
	}
	if b.Stats().Watchers != 0 {
		t.Fatal("a rejected Forward left a watcher registered")
	}
}

// Batch sizes the forwarder's buffer: above MaxBatch (here math.MaxInt,
// which make cannot allocate) it is an error naming the field, not a
// forwarder whose goroutine panics.
func TestForwardRejectsABatchAboveMaxBatch(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	fwd, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev", Batch: math.MaxInt})
	if err == nil {
		closeWithin(fwd, time.Second)
		t.Fatal("Forward accepted Batch math.MaxInt")
	}
	if !strings.Contains(err.Error(), "ForwardConfig.Batch") {
		t.Errorf("error %q does not name ForwardConfig.Batch", err)
	}
	if b.Stats().Watchers != 0 {
		t.Fatal("a rejected Forward left a watcher registered")
	}
}

func TestForwarderRoutesBySubjectOfAndCountsInvalidSubjects(t *testing.T) {
	srv := natstest.New(t)
	subA, subB := rawSub(t, srv.Connect(t), "ev.a"), rawSub(t, srv.Connect(t), "ev.b")
	var mu sync.Mutex
	var errs []error
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		SubjectOf: func(e event) string {
			switch e.Src {
			case 0:
				return "ev.a"
			case 1:
				return "ev.b"
			case 2:
				return "ev.*" // a wildcard cannot be published to
			}
			panic("no subject")
		},
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range []int{0, 1, 2, 3, 0, 1} {
		_ = b.Action(event{Src: src, Seq: i})
	}
	closeAndWait(t, f)
	if a := nextEvents(t, subA, 2); a[0].Seq != 0 || a[1].Seq != 4 {
		t.Fatalf("ev.a got %v", a)
	}
	if bb := nextEvents(t, subB, 2); bb[0].Seq != 1 || bb[1].Seq != 5 {
		t.Fatalf("ev.b got %v", bb)
	}
	st := f.Stats()
	if st.Published != 4 || st.Failed != 2 || st.Received != 6 {
		t.Fatalf("stats %+v, want 4 published, 2 failed", st)
	}
	if len(errs) != 2 || !errors.Is(errs[0], fanoutnats.ErrInvalidSubject) || !errors.Is(errs[1], fanoutnats.ErrInvalidSubject) {
		t.Fatalf("OnError got %v, want two ErrInvalidSubject", errs)
	}
	var fe *fanoutnats.Error
	if !errors.As(errs[0], &fe) || fe.Op != "subject" {
		t.Fatalf("OnError got %#v, want an *Error with Op subject", errs[0])
	}
}

func TestForwarderCountsEncodeErrorsAndOversizedPayloads(t *testing.T) {
	srv := natstest.New(t, func(o *server.Options) { o.MaxPayload = 1024 })
	sub := rawSub(t, srv.Connect(t), "ev")
	var mu sync.Mutex
	var errs []error
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		Subject: "ev",
		Codec: fanoutnats.Codec[event]{Encode: func(e event) ([]byte, error) {
			switch e.Src {
			case 1:
				return nil, errors.New("cannot encode")
			case 2:
				return []byte(`{"seq":` + strings.Repeat(" ", 2000) + `1}`), nil // over MaxPayload
			case 3:
				panic("encoder bug")
			}
			return json.Marshal(e)
		}},
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range []int{0, 1, 2, 3, 0} {
		_ = b.Action(event{Src: src, Seq: i})
	}
	closeAndWait(t, f)
	got := nextEvents(t, sub, 2)
	if got[0].Seq != 0 || got[1].Seq != 4 {
		t.Fatalf("subscriber got %v, want seq 0 and 4", got)
	}
	st := f.Stats()
	if st.Published != 2 || st.Failed != 3 {
		t.Fatalf("stats %+v, want 2 published and 3 failed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	// A batch is encoded before it is published: the encode errors first.
	if len(errs) != 3 || !errors.Is(errs[0], fanoutnats.ErrEncode) || !errors.Is(errs[1], fanoutnats.ErrEncode) || !errors.Is(errs[2], nats.ErrMaxPayload) {
		t.Fatalf("OnError got %v, want ErrEncode, ErrEncode, ErrMaxPayload", errs)
	}
	if fanoutnats.Retryable(errs[2]) {
		t.Fatal("an oversized payload is classified retryable")
	}
}

func TestForwarderCloseDrainsWhatItsWatcherAccepted(t *testing.T) {
	srv := natstest.New(t)
	sub := rawSub(t, srv.Connect(t), "ev")
	b := fanout.New[event](fanout.WithQueueLength(1000))
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev", Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		_ = b.Action(event{Seq: i})
	}
	closeAndWait(t, f) // right after publishing: most values are still queued
	if err := b.Action(event{Seq: n}); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Published != n || st.Received != n || st.Watcher.Queued != 0 {
		t.Fatalf("stats %+v, want all %d published and nothing after Close", st, n)
	}
	if got := nextEvents(t, sub, n); got[n-1].Seq != n-1 {
		t.Fatalf("last value %v", got[n-1])
	}
}

func TestForwarderStopsWhenTheBroadcasterShutsDown(t *testing.T) {
	srv := natstest.New(t)
	sub := rawSub(t, srv.Connect(t), "ev")
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		_ = b.Action(event{Seq: i})
	}
	b.Shutdown()
	waitDone(t, f)
	if !errors.Is(f.Err(), fanout.ErrStopped) {
		t.Fatalf("Err = %v, want fanout.ErrStopped", f.Err())
	}
	if got := nextEvents(t, sub, 100); got[99].Seq != 99 {
		t.Fatalf("values accepted before Shutdown were not all forwarded: %v", got[99])
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatalf("Close after the forwarder stopped: %v", err)
	}
}

func TestForwarderStopsAndReleasesProducersWhenTheConnectionCloses(t *testing.T) {
	srv := natstest.New(t)
	nc := srv.Connect(t)
	b := fanout.New[event](fanout.WithQueueLength(4))
	f, err := fanoutnats.Forward(b, nc, fanoutnats.ForwardConfig[event]{Subject: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	// The forwarder's watcher waits when full: producers would block for
	// good if the forwarder kept it registered after the connection died.
	ctx := guardCtx(t)
	for i := range 100 {
		if err := b.ActionContext(ctx, event{Seq: i}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	waitDone(t, f)
	if !errors.Is(f.Err(), nats.ErrConnectionClosed) {
		t.Fatalf("Err = %v, want nats.ErrConnectionClosed", f.Err())
	}
	st := f.Stats()
	if st.Published != 0 || st.Failed != st.Received || st.Received+st.Watcher.Dropped+uint64(st.Watcher.Queued) > 100 || st.Received == 0 {
		t.Fatalf("stats %+v: every value taken must be counted failed", st)
	}
	if b.Stats().Watchers != 0 {
		t.Fatal("the forwarder's watcher is still registered")
	}
}

func TestForwarderPanickingOnErrorDoesNotStopIt(t *testing.T) {
	srv := natstest.New(t)
	sub := rawSub(t, srv.Connect(t), "ev")
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		SubjectOf: func(e event) string {
			if e.Seq%2 == 1 {
				return ""
			}
			return "ev"
		},
		OnError: func(error) { panic("handler bug") },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		_ = b.Action(event{Seq: i})
	}
	closeAndWait(t, f)
	nextEvents(t, sub, 5)
	if st := f.Stats(); st.Published != 5 || st.Failed != 5 || st.CallbackPanics != 5 {
		t.Fatalf("stats %+v, want 5 published, 5 failed, 5 contained panics", st)
	}
}

func TestForwarderCloseOnADeadServerReturnsAtItsDeadline(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		Subject: "ev", JetStream: true, AckTimeout: 50 * time.Millisecond, RetryWait: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	for i := range 50 {
		_ = b.Action(event{Seq: i})
	}
	natstest.Eventually(t, "a retry", func() bool { return f.Stats().Retries > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := f.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v past its 100ms deadline", d)
	}
	waitDone(t, f)
	st := f.Stats()
	if st.Published != 0 || st.Abandoned+st.Failed != st.Received || st.Received != 50 {
		t.Fatalf("stats %+v: every value must be abandoned", st)
	}
}

func TestForwarderCountsValuesTheServerDeniedAsFailed(t *testing.T) {
	srv := natstest.New(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Deny: []string{"ev.secret"}},
		}}}
	})
	sub := rawSub(t, srv.Connect(t, nats.UserInfo("u", "p")), "ev.*")
	var mu sync.Mutex
	var errs []error
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t, nats.UserInfo("u", "p")), fanoutnats.ForwardConfig[event]{
		SubjectOf: func(e event) string {
			if e.Src == 1 {
				return "ev.secret"
			}
			return "ev.public"
		},
		OnError: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Action(event{Src: 0, Seq: 0})
	_ = b.Action(event{Src: 1, Seq: 1})
	closeAndWait(t, f)
	if got := nextEvents(t, sub, 1); got[0].Seq != 0 {
		t.Fatalf("got %v", got)
	}
	if st := f.Stats(); st.Published != 1 || st.Failed != 1 {
		t.Fatalf("stats %+v, want the denied value counted as failed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 || !errors.Is(errs[len(errs)-1], nats.ErrPermissionViolation) {
		t.Fatalf("OnError got %v, want a permissions violation", errs)
	}
}

func TestForwardersWithAValueMsgIDStoreEachValueOnce(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	const n = 100
	var fwds []*fanoutnats.Forwarder[event]
	for range 2 { // two processes publishing the same values
		b := fanout.New[event]()
		f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
			Subject: "ev", JetStream: true, MsgID: func(e event) string { return fmt.Sprint("value-", e.Seq) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			_ = b.Action(event{Seq: i})
		}
		closeAndWait(t, f)
		fwds = append(fwds, f)
	}
	if got := streamMsgs(t, js, "EV"); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	a, b := fwds[0].Stats(), fwds[1].Stats()
	if a.Published != n || b.Published != n || a.Duplicates != 0 || b.Duplicates != n {
		t.Fatalf("stats %+v and %+v: want the second forwarder's values acknowledged as duplicates", a, b)
	}
}

func TestForwarderLogsFailuresWithItsLogger(t *testing.T) {
	srv := natstest.New(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{
		SubjectOf: func(event) string { return "bad subject" }, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Action(event{Seq: 1})
	closeAndWait(t, f)
	mu.Lock()
	defer mu.Unlock()
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "op=subject") || !strings.Contains(out, "invalid subject") {
		t.Fatalf("log: %q", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestFramesCarryEveryValueInOrderThroughCoreNATSAndJetStream(t *testing.T) {
	for _, mode := range []string{"core", "jetstream durable", "jetstream ordered"} {
		t.Run(mode, func(t *testing.T) {
			srv, js := streamEV(t)
			in := fanout.New[event]()
			w, _ := in.Watch()
			var inbound interface {
				closer
				Stats() fanoutnats.InboundStats
			}
			switch mode {
			case "core":
				inbound = subscribe(t, srv.Connect(t), in, fanoutnats.SubscribeConfig[event]{Subject: "ev"})
			case "jetstream durable":
				inbound = consume(t, js, in, fanoutnats.ConsumeConfig[event]{Stream: "EV", Durable: "d"})
			default:
				inbound = consume(t, js, in, fanoutnats.ConsumeConfig[event]{Stream: "EV"})
			}
			out := fanout.New[event](fanout.WithQueueLength(1000))
			fwd, err := fanoutnats.Forward(out, srv.Connect(t), fanoutnats.ForwardConfig[event]{
				Subject: "ev", Frame: 50, JetStream: mode != "core"})
			if err != nil {
				t.Fatal(err)
			}
			const n = 1000
			if _, err := out.ActionBatch(events(0, n)); err != nil { // queued at once: the forwarder takes full batches
				t.Fatal(err)
			}
			got := seqs(recv(t, w, n))
			closeAndWait(t, fwd)
			closeAndWait(t, inbound)
			for i, s := range got {
				if s != i {
					t.Fatalf("value %d has seq %d", i, s)
				}
			}
			fs, is := fwd.Stats(), inbound.Stats()
			if fs.Published != n || fs.Frames == 0 || is.Received != n || is.Delivered != n || is.Frames != fs.Frames {
				t.Fatalf("forwarder %+v, inbound %+v: want %d values in frames", fs, is, n)
			}
			if mode == "jetstream durable" && is.AckFloor != streamLastSeq(t, js, "EV") {
				t.Fatalf("ack floor %d, want the stream's last sequence", is.AckFloor)
			}
		})
	}
}

func streamLastSeq(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(guardCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

func TestFramesGiveEachFrameOneMessageIDFromItsFirstValue(t *testing.T) {
	srv, js := streamEV(t)
	cfg := fanoutnats.ForwardConfig[event]{Subject: "ev", Frame: 4, JetStream: true,
		MsgID: func(e event) string { return fmt.Sprint("v", e.Seq) }}
	for range 2 { // two forwarders, the same frames: stored once
		out := fanout.New[event](fanout.WithQueueLength(100))
		fwd, err := fanoutnats.Forward(out, srv.Connect(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.ActionBatch(events(0, 8)); err != nil {
			t.Fatal(err)
		}
		closeAndWait(t, fwd)
	}
	st, err := js.Stream(guardCtx(t), "EV")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 2 {
		t.Fatalf("stream holds %d messages, want 2 frames of 4", n)
	}
	for seq, want := range map[uint64]string{1: "v0+4", 2: "v4+4"} {
		m, err := st.GetMsg(guardCtx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != want || m.Header.Get(fanoutnats.FrameHeader) != "4" {
			t.Errorf("message %d: ID %q, header %v: want %q and a frame of 4", seq, got, m.Header, want)
		}
	}
}

// A frame holding a value for which MsgID returns "" carries no message
// ID, as that value alone carries none: a derived one ("+4" for a first
// value without an ID, "id-0+4" behind one) would make the stream drop the
// next frame of as many values behind the same first ID as a duplicate.
func TestFramesHoldingAValueWithoutAnIDCarryNoMessageID(t *testing.T) {
	msgID := func(e event) string {
		if e.Src == 0 {
			return "" // no ID of its own
		}
		return fmt.Sprint("id-", e.Seq)
	}
	cases := map[string][][]event{ // a batch per forwarder
		"first value without an ID":  {events(0, 8)},
		"later values without an ID": {{{Src: 1}, {Seq: 1}, {Seq: 2}, {Seq: 3}}, {{Src: 1}, {Seq: 11}, {Seq: 12}, {Seq: 13}}},
	}
	for name, batches := range cases {
		t.Run(name, func(t *testing.T) {
			srv, js := streamEV(t)
			var want []int
			for _, batch := range batches {
				out := fanout.New[event](fanout.WithQueueLength(100))
				fwd, err := fanoutnats.Forward(out, srv.Connect(t), fanoutnats.ForwardConfig[event]{
					Subject: "ev", JetStream: true, Frame: 4, MsgID: msgID})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := out.ActionBatch(batch); err != nil { // one batch: frames of 4
					t.Fatal(err)
				}
				closeAndWait(t, fwd)
				if st := fwd.Stats(); st.Published != uint64(len(batch)) || st.Duplicates != 0 {
					t.Errorf("forwarder: %d published, %d duplicates; want %d and none", st.Published, st.Duplicates, len(batch))
				}
				want = append(want, seqs(batch)...)
			}
			vals, ids := storedMessages(t, js, "EV")
			if !slices.Equal(seqs(vals), want) {
				t.Errorf("the stream holds the values %v, want %v", seqs(vals), want)
			}
			for i, id := range ids {
				if id != "" {
					t.Errorf("message %d has the ID %q, want none", i+1, id)
				}
			}
		})
	}
}

// padded is an event with padding, to make its encoding as large as needed.
type padded struct {
	Seq int    `json:"seq"`
	Pad string `json:"pad"`
}

// Frames are sized by the server's maximum payload (1 MiB); a stream whose
// MaxMsgSize is 1 KiB refuses them as too large. The forwarder splits each
// in halves until they fit, so every value the stream stores alone is
// stored, in order; only a value too large alone fails. With MsgID, the
// parts' IDs are those pack would give them: a second forwarder of the
// same values stores nothing again.
func TestFramesTooLargeForTheStreamAreSplitUntilTheyFit(t *testing.T) {
	const n, tooLarge = 500, 250
	vals := make([]padded, n)
	var want []int
	for i := range vals {
		vals[i] = padded{Seq: i, Pad: strings.Repeat("x", 100)} // 121 bytes
		if i == tooLarge {
			vals[i].Pad = strings.Repeat("x", 2000)
			continue
		}
		want = append(want, i)
	}
	for name, msgID := range map[string]func(padded) string{
		"own IDs":   nil,
		"value IDs": func(v padded) string { return fmt.Sprint("v", v.Seq) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := natstest.New(t)
			js := natstest.JetStream(t, srv.Connect(t))
			if _, err := js.CreateStream(guardCtx(t), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev"}, MaxMsgSize: 1024}); err != nil {
				t.Fatal(err)
			}
			forwarders := 1
			if msgID != nil {
				forwarders = 2
			}
			for i := range forwarders {
				st := forwardPadded(t, srv.Connect(t), vals, fanoutnats.ForwardConfig[padded]{Subject: "ev", JetStream: true, Frame: 64, MsgID: msgID})
				if st.Published != n-1 || st.Failed != 1 || st.Splits == 0 {
					t.Errorf("forwarder %d: %d published, %d failed, %d splits; want %d, 1 (the value too large alone) and some",
						i, st.Published, st.Failed, st.Splits, n-1)
				}
				if i > 0 && st.Duplicates != n-1 {
					t.Errorf("forwarder %d: %d duplicates, want %d: the parts' IDs differ", i, st.Duplicates, n-1)
				}
			}
			if got, _ := storedMessages(t, js, "EV"); !slices.Equal(seqs(got), want) {
				t.Errorf("the stream holds %d values %v..., want each of the %d that fit once, in order", len(got), seqs(got)[:min(len(got), 10)], n-1)
			}
		})
	}
}

// forwardPadded forwards vals, accepted as one batch, with a forwarder
// configured by cfg, closes it and returns its statistics.
func forwardPadded(t *testing.T, nc *nats.Conn, vals []padded, cfg fanoutnats.ForwardConfig[padded]) fanoutnats.ForwarderStats {
	t.Helper()
	out := fanout.New[padded](fanout.WithQueueLength(len(vals)))
	fwd, err := fanoutnats.Forward(out, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.ActionBatch(vals); err != nil {
		t.Fatal(err)
	}
	closeAndWait(t, fwd)
	return fwd.Stats()
}

// storedMessages returns the values of every message of the stream name,
// in its order, and the Nats-Msg-Id of each message.
func storedMessages(t *testing.T, js jetstream.JetStream, name string) (vals []event, ids []string) {
	t.Helper()
	st, err := js.Stream(guardCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= st.CachedInfo().State.LastSeq; seq++ {
		m, err := st.GetMsg(guardCtx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		vals = append(vals, frameEvents(t, &nats.Msg{Header: m.Header, Data: m.Data})...)
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return vals, ids
}

func TestFramesHoldOneSubjectEachAndFitTheServersMaxPayload(t *testing.T) {
	srv := natstest.New(t, func(o *server.Options) { o.MaxPayload = 1024 })
	sub := rawSub(t, srv.Connect(t), "ev.*")
	out := fanout.New[event](fanout.WithQueueLength(1000))
	fwd, err := fanoutnats.Forward(out, srv.Connect(t), fanoutnats.ForwardConfig[event]{Frame: 1000, Batch: 1000,
		SubjectOf: func(e event) string { return fmt.Sprint("ev.", e.Seq/100%2) }}) // runs of 100 per subject
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	if _, err := out.ActionBatch(events(0, n)); err != nil {
		t.Fatal(err)
	}
	closeAndWait(t, fwd)
	var got []int
	frames := 0
	for len(got) < n {
		m, err := sub.NextMsg(hangGuard)
		if err != nil {
			t.Fatalf("after %d values: %v", len(got), err)
		}
		evs := frameEvents(t, m)
		frames += min(len(evs)-1, 1)
		for _, e := range evs {
			if want := fmt.Sprint("ev.", e.Seq/100%2); m.Subject != want {
				t.Fatalf("value %d in a message for %s, want %s", e.Seq, m.Subject, want)
			}
			got = append(got, e.Seq)
		}
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("value %d has seq %d", i, v)
		}
	}
	// 10 runs of 100 values of about 20 bytes, in frames within the
	// server's 1024 bytes less room for headers: 3 or more per run.
	if fs := fwd.Stats(); fs.Published != n || fs.Failed != 0 || frames < 30 || int(fs.Frames) != frames {
		t.Fatalf("forwarder %+v, %d frames received: want %d values in 30 frames or more", fs, frames, n)
	}
}

// frameEvents decodes the values of a message: a frame (see
// fanoutnats.FrameHeader) or a plain message.
func frameEvents(t *testing.T, m *nats.Msg) []event {
	t.Helper()
	parts := [][]byte{m.Data}
	if m.Header.Get(fanoutnats.FrameHeader) != "" {
		parts = nil
		for body := m.Data; len(body) > 0; {
			size, k := binary.Uvarint(body)
			if k <= 0 || int(size) > len(body)-k {
				t.Fatalf("malformed frame %q", m.Data)
			}
			parts = append(parts, body[k:k+int(size)])
			body = body[k+int(size):]
		}
		if strconv.Itoa(len(parts)) != m.Header.Get(fanoutnats.FrameHeader) {
			t.Fatalf("a frame of %d values says %s", len(parts), m.Header.Get(fanoutnats.FrameHeader))
		}
	}
	evs := make([]event, len(parts))
	for i, p := range parts {
		if err := json.Unmarshal(p, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// A forwarder whose watcher is registered WithCommit commits what it has
// published, so that Taken follows it (it never committed: Taken stayed
// at 0, and a durable Consume feeding the broadcaster acknowledged
// nothing).
func TestForwarderWithCommitCommitsWhatItPublished(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event]()
	sub := rawSub(t, srv.Connect(t), "ev")
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev", Watch: []fanout.Option{fanout.WithCommit()}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(f, time.Second)
	for i := range 3 {
		if err := b.Action(event{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	nextEvents(t, sub, 3)
	natstest.Eventually(t, "Taken to follow what was published", func() bool { return b.Taken() == 3 })
}

// forwardedWithTheServerDown starts a core NATS forwarder with cfg, shuts
// its server down, and publishes three values, which the client can only
// buffer.
func forwardedWithTheServerDown(t *testing.T, cfg fanoutnats.ForwardConfig[event]) (*fanout.Broadcaster[event], *fanoutnats.Forwarder[event]) {
	t.Helper()
	srv := natstest.New(t)
	nc := srv.Connect(t)
	b := fanout.New[event]()
	f, err := fanoutnats.Forward(b, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	natstest.Eventually(t, "the client to see the server gone", func() bool { return !nc.IsConnected() })
	for i := range 3 {
		if err := b.Action(event{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	return b, f
}

// Close of a core NATS forwarder whose server is down does not return as
// if done: what it published while the client reconnected is still in the
// client's buffer, so Close flushes it, waiting for the server until its
// context ends, and the failed flush is counted and reported (it returned
// nil at once, counting nothing: the connection's Close then dropped the
// values unseen).
func TestForwarderCloseWithTheServerDownCountsTheFlushItCouldNotMake(t *testing.T) {
	var log errorLog
	_, f := forwardedWithTheServerDown(t, fanoutnats.ForwardConfig[event]{Subject: "ev", OnError: log.add})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := f.Close(ctx)
	select {
	case <-f.Done(): // its flush ends with Close's context
	case <-time.After(10 * time.Second):
		t.Fatal("the forwarder's goroutine did not exit after Close gave up")
	}
	if st := f.Stats(); err == nil || st.FlushErrors == 0 || len(log.list()) == 0 {
		t.Fatalf("Close = %v, FlushErrors %d, %d errors reported: the unflushed values went unseen", err, st.FlushErrors, len(log.list()))
	}
}

// A core NATS forwarder that ends because its broadcaster shut down
// flushes what the client still buffers, as Close does: with the server
// down the flush fails, counted and reported, rather than the values
// being left for the connection's Close to drop unseen.
func TestForwarderEndedByShutdownWithTheServerDownCountsTheFlushItCouldNotMake(t *testing.T) {
	var log errorLog
	b, f := forwardedWithTheServerDown(t, fanoutnats.ForwardConfig[event]{Subject: "ev", OnError: log.add, FlushTimeout: 200 * time.Millisecond})
	b.Shutdown()
	waitDone(t, f)
	if st := f.Stats(); st.FlushErrors == 0 || len(log.list()) == 0 {
		t.Fatalf("Published %d, Flushes %d, FlushErrors %d, %d errors reported: the unflushed values went unseen",
			st.Published, st.Flushes, st.FlushErrors, len(log.list()))
	}
}
