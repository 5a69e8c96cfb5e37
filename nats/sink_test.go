package fanoutnats_test

import (
	"context"
	"errors"
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

// fastRetry is the sink's retry policy with short pauses, for tests.
func fastRetry(tries int) fanout.RetryPolicy {
	p := fanoutnats.RetryPolicy()
	p.MaxTries, p.Sleep, p.RandomFirst = tries, time.Millisecond, false
	return p
}

func newRecorder(t *testing.T, sink fanout.Sink[event], tries int, opts ...fanout.RecorderOption) *fanout.Recorder[event] {
	t.Helper()
	rec, err := fanout.NewRecorder[event](append(opts, fanout.WithRetry(fastRetry(tries)))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.StartSink(sink, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		_ = rec.Shutdown(ctx)
	})
	return rec
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	st, err := js.Stream(guardCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func TestSinkStoresEveryRecordedValueOnce(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "REC", "rec.>")
	sink, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{Subject: "rec.events"})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, sink, 3)
	for i := range 100 {
		if err := rec.Record(event{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "REC"); n != 100 {
		t.Fatalf("stream holds %d messages, want 100", n)
	}
	if st := sink.Stats(); st.Published != 100 || st.Duplicates != 0 || st.Failures != 0 {
		t.Fatalf("sink stats %+v", st)
	}
	if rs := rec.Stats(); rs.Written != 100 || rs.Dropped != 0 {
		t.Fatalf("recorder stats %+v", rs)
	}
}

// ackLost stores each value, then reports a time-out the first time, as if
// the stream's ack had been lost on the way back.
type ackLost struct {
	*fanoutnats.Sink[event]
	mu   sync.Mutex
	seen map[int]bool
}

func (s *ackLost) Create(ctx context.Context, e event) (event, error) {
	v, err := s.Sink.Create(ctx, e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.seen[e.Seq] {
		s.seen[e.Seq] = true
		return v, nats.ErrTimeout
	}
	return v, err
}

func TestSinkRetriesAfterALostAckStoreTheValueOnce(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "REC", "rec")
	sink, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{Subject: "rec"})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, &ackLost{Sink: sink, seen: map[int]bool{}}, 3)
	const n = 50
	for i := range n {
		_ = rec.Record(event{Seq: i})
	}
	if err := rec.Flush(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := streamMsgs(t, js, "REC"); got != n {
		t.Fatalf("stream holds %d messages after %d retried writes, want %d", got, n, n)
	}
	if st := sink.Stats(); st.Published != n || st.Duplicates != n {
		t.Fatalf("sink stats %+v, want %d published and %d duplicates", st, n, n)
	}
	if rs := rec.Stats(); rs.Written != n || rs.Failures != n || rs.Dropped != 0 {
		t.Fatalf("recorder stats %+v", rs)
	}
}

func TestSinkErrorsAreClassifiedForTheRecorder(t *testing.T) {
	srv := natstest.New(t, func(o *server.Options) {
		o.MaxPayload = 4096
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Deny: []string{"rec.secret"}},
		}}}
	})
	nc := srv.Connect(t, nats.UserInfo("u", "p"))
	js := natstest.JetStream(t, nc)
	natstest.Stream(t, js, "REC", "rec.>")
	if _, err := js.CreateStream(guardCtx(t), jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small"}, MaxMsgSize: 64}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		subject   string
		payload   int // bytes of padding in the value
		retryable bool
		want      error
	}{
		{"no stream", "nostream", 0, true, jetstream.ErrNoStreamResponse},
		{"larger than the stream allows", "small", 100, false, jetstream.ErrStreamMessageExceedsMaximum},
		{"larger than the server allows", "rec.big", 5000, false, nats.ErrMaxPayload},
		{"permission", "rec.secret", 0, false, nats.ErrPermissionViolation},
		{"invalid subject", "rec.*", 0, false, fanoutnats.ErrInvalidSubject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{
				SubjectOf: func(event) string { return tt.subject },
				Codec: fanoutnats.Codec[event]{Encode: func(e event) ([]byte, error) {
					return []byte(`{"seq":1,"pad":"` + strings.Repeat("x", tt.payload) + `"}`), nil
				}},
				Timeout: 300 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = sink.Create(guardCtx(t), event{Seq: 1})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Create: %v, want %v", err, tt.want)
			}
			if got := fanoutnats.Retryable(err); got != tt.retryable {
				t.Fatalf("Retryable(%v) = %v, want %v", err, got, tt.retryable)
			}
			rec := newRecorder(t, sink, 3)
			_ = rec.Record(event{Seq: 2})
			if err := rec.Flush(guardCtx(t)); err != nil {
				t.Fatal(err)
			}
			rs := rec.Stats()
			if tt.retryable && (rs.DroppedRetries != 1 || rs.Failures != 3) {
				t.Fatalf("recorder stats %+v, want 3 tries then a drop for retries", rs)
			}
			if !tt.retryable && (rs.DroppedRejected != 1 || rs.Failures != 1) {
				t.Fatalf("recorder stats %+v, want one try then a drop as rejected", rs)
			}
		})
	}
}

func TestNewSinkRejectsAMissingSubject(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	if _, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{}); !errors.Is(err, fanoutnats.ErrInvalidSubject) {
		t.Fatalf("NewSink without a subject: %v", err)
	}
	if _, err := fanoutnats.NewSink[event](nil, fanoutnats.SinkConfig[event]{Subject: "a"}); err == nil {
		t.Fatal("NewSink accepted a nil JetStream")
	}
}

// A MsgID that panics fails the value's publish, as in a forwarder: the
// subject, valid, is not reported as invalid.
func TestSinkReportsAPanickingMsgIDAsAFailedPublish(t *testing.T) {
	srv := natstest.New(t)
	js := natstest.JetStream(t, srv.Connect(t))
	natstest.Stream(t, js, "EV", "ev")
	s, err := fanoutnats.NewSink(js, fanoutnats.SinkConfig[event]{Subject: "ev", MsgID: func(event) string { panic("boom") }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Create(guardCtx(t), event{Seq: 1})
	var fe *fanoutnats.Error
	if !errors.As(err, &fe) || fe.Op != "publish" || errors.Is(err, fanoutnats.ErrInvalidSubject) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Create = %v: want a publish error naming the panic, not an invalid subject", err)
	}
	if fanoutnats.Retryable(err) {
		t.Errorf("Retryable(%v): the same value would panic again", err)
	}
}
