package exporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
)

// newPstest starts Google's Pub/Sub fake (pstest: the real gRPC API, in
// process) and points the client at it as at an emulator
// (PUBSUB_EMULATOR_HOST), so that the sink runs as configured. topics are
// created in project p.
func newPstest(t *testing.T, topics []string, opts ...pstest.ServerReactorOption) *pstest.Server {
	t.Helper()
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	c, err := pubsub.NewClient(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, topic := range topics {
		if _, err := c.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: "projects/p/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// pubsubReceiver builds the sink of a receiver configured with the YAML
// body of its pubsub key.
func pubsubReceiver(t *testing.T, body string) Sink {
	t.Helper()
	c := parseOK(t, "receivers:\n  - name: ps\n    pubsub: "+body+"\n")
	s, err := c.Receivers[0].build("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// published returns the data and idempotency keys of the messages of
// topic, in the order pstest holds them.
func published(srv *pstest.Server, topic string) (data, keys []string) {
	for _, m := range srv.Messages() {
		if m.Topic == "projects/p/topics/"+topic {
			data, keys = append(data, string(m.Data)), append(keys, m.Attributes["idempotency-key"])
		}
	}
	return data, keys
}

// Their configuration publishes one message per occurrence, its data the
// record, its idempotency-key attribute the occurrence's key.
func TestPubsubPublishesEachRecordWithItsIdempotencyKey(t *testing.T) {
	srv := newPstest(t, []string{"kube-event"})
	s := pubsubReceiver(t, "{gcloud_project_id: p, topic: kube-event, create_topic: False}")
	batch := []*Occurrence{occ("a", 1, "ns"), occ("a", 2, "ns"), occ("b", 1, "ns")}
	if n, err := s.Write(t.Context(), batch); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	data, keys := published(srv, "kube-event")
	for i, k := range keys { // Pub/Sub keeps no order without ordering keys
		if j := slices.IndexFunc(batch, func(o *Occurrence) bool { return o.Key() == k }); j < 0 || data[i] != string(batch[j].EventJSON("")) {
			t.Errorf("message %s: data %s", k, data[i])
		}
	}
	if slices.Sort(keys); !slices.Equal(keys, []string{"a/1", "a/2", "b/1"}) {
		t.Errorf("keys %v, want a/1, a/2 and b/1", keys)
	}
}

// create_topic creates a missing topic, and accepts one that exists
// (kubernetes-event-exporter does not start then).
func TestPubsubCreateTopicCreatesAMissingTopicAndAcceptsAnExistingOne(t *testing.T) {
	srv := newPstest(t, []string{"existing"})
	for _, topic := range []string{"created", "existing", "projects/p/topics/named"} {
		s := pubsubReceiver(t, "{gcloud_project_id: p, create_topic: true, topic: "+topic+"}")
		if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
			t.Fatalf("%s: %d, %v", topic, n, err)
		}
	}
	for _, topic := range []string{"created", "existing", "named"} {
		if _, keys := published(srv, topic); len(keys) != 1 {
			t.Errorf("topic %s: %d messages, want 1", topic, len(keys))
		}
	}
}

func TestPubsubMissingTopicIsRetryable(t *testing.T) {
	newPstest(t, nil)
	s := pubsubReceiver(t, "{gcloud_project_id: p, topic: missing, timeout: 2s}")
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "missing topic", n, err, false)
}

func TestPubsubRefusedMessagesArePermanentAndDeniedOnesRetryable(t *testing.T) {
	for code, permanent := range map[codes.Code]bool{codes.InvalidArgument: true, codes.PermissionDenied: false} {
		newPstest(t, []string{"events"}, pstest.WithErrorInjection("Publish", code, "injected"))
		s := pubsubReceiver(t, "{gcloud_project_id: p, topic: events, timeout: 2s}")
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, code.String(), n, err, permanent)
	}
}

// A message over Pub/Sub's 10 MB is dropped after the ones before it.
func TestPubsubOversizedMessageIsPermanentAfterThePublishedPrefix(t *testing.T) {
	srv := newPstest(t, []string{"events"})
	s := pubsubReceiver(t, "{gcloud_project_id: p, topic: events}")
	huge := occ("huge", 1, "ns")
	huge.Message = strings.Repeat("x", 11<<20)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), huge})
	if _, keys := published(srv, "events"); n != 1 || !IsPermanent(err) || !strings.Contains(err.Error(), "huge/1") ||
		!slices.Equal(keys, []string{"a/1"}) {
		t.Errorf("n %d, err %v, published %v; want a/1 published and a permanent error about huge/1", n, err, keys)
	}
}

func TestPubsubConcurrentWritesArePublished(t *testing.T) {
	srv := newPstest(t, []string{"events"})
	s := pubsubReceiver(t, "{gcloud_project_id: p, topic: events}")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				batch := []*Occurrence{occ(fmt.Sprint(w, "-", i), 1, "ns"), occ(fmt.Sprint(w, "-", i), 2, "ns")}
				if n, err := s.Write(context.Background(), batch); n != 2 || err != nil {
					t.Error(n, err)
				}
			}
		})
	}
	wg.Wait()
	if _, keys := published(srv, "events"); len(keys) != 80 {
		t.Errorf("%d messages, want 80", len(keys))
	}
}

func TestPubsubTheirExampleLoadsAndBadKeysAreNamed(t *testing.T) {
	c, err := LoadConfig(theirs + "17-pubsub.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Receivers[0].Pubsub; p == nil || p.GcloudProjectID != "my-project" || p.Topic != "kube-event" || p.CreateTopic ||
		len(otherWarnings(c.Warnings)) != 0 {
		t.Errorf("pubsub %+v, warnings %q", p, c.Warnings)
	}
	wantConfigErrors(t, map[string]string{
		"pubsub: {topic: t1}":                                            "pubsub.gcloud_project_id is required",
		"pubsub: {gcloud_project_id: p}":                                 `pubsub.topic "" is not a topic ID`,
		"pubsub: {gcloud_project_id: p, topic: 1ab}":                     `pubsub.topic "1ab" is not a topic ID`,
		"pubsub: {gcloud_project_id: p, topic: goog-x}":                  `pubsub.topic "goog-x"`,
		"pubsub: {gcloud_project_id: p, topic: t1, create_topic: maybe}": "maybe",
	})
}

// Close keeps to its context's deadline (the shutdown's budget) though a
// cancelled write left a message the service has not answered.
func TestPubsubCloseReturnsByItsDeadlineWithAMessageOutstanding(t *testing.T) {
	srv := newPstest(t, []string{"events"})
	srv.SetAutoPublishResponse(false) // publishes wait for an answer, given only when the test ends
	s := pubsubReceiver(t, "{gcloud_project_id: p, topic: events, timeout: 2s}")
	t.Cleanup(func() {
		for range 20 { // the fake answers under its lock: let it stop
			srv.AddPublishResponse(&pubsubpb.PublishResponse{MessageIds: []string{"m"}}, nil)
		}
	})
	wctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if n, err := s.Write(wctx, []*Occurrence{occ("a", 1, "ns")}); n != 0 || err == nil {
		t.Fatalf("write: %d, %v; want it cancelled", n, err)
	}
	cctx, ccancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer ccancel()
	start := time.Now()
	err := s.Close(cctx)
	if took := time.Since(start); took > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close took %s and returned %v; want its deadline's error after 100ms", took, err)
	}
}
