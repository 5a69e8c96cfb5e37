package exporter

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestNATSSinkStoresEachOccurrenceOnceKeyedByUIDAndCount(t *testing.T) {
	_, connect := natsServer(t)
	s, err := NewNATSSink(NATSConfig{Subject: "events.k8s", connect: connect})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	batch := []*Occurrence{occ("a", 1, "ns"), occ("a", 2, "ns"), occ("b", 1, "ns")}
	for range 2 { // the second write is a retry, or a restart's replay
		if n, err := s.Write(context.Background(), batch); n != 3 || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := streamKeys(t, connect); !slices.Equal(got, []string{"a/1", "a/2", "b/1"}) {
		t.Errorf("stream holds %v, want each occurrence once", got)
	}
	if st := s.Stats(); st.Published != 3 || st.Duplicates != 3 {
		t.Errorf("stats %+v, want 3 published and 3 duplicates", st)
	}
}

func TestNATSSinkRejectsAnOversizedOccurrencePermanently(t *testing.T) {
	_, connect := natsServer(t)
	s, err := NewNATSSink(NATSConfig{Subject: "events.k8s", connect: connect})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	huge := occ("huge", 1, "ns")
	huge.Message = strings.Repeat("x", 100<<10)
	n, err := s.Write(context.Background(), []*Occurrence{occ("a", 1, "ns"), huge, occ("b", 1, "ns")})
	if n != 1 || !IsPermanent(err) {
		t.Errorf("n %d, err %v; want 1 written and a permanent error for the oversized one", n, err)
	}
}

// A NATS url or subject the sink can never use passed LoadConfig (and
// --check-config) and only failed when the exporter started, without its
// line.
func TestNATSURLOrSubjectThatCanNeverWorkIsAConfigErrorWithItsLine(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		`nats: {url: "::bad", subject: k8s}`:                      `line 2: receiver "r": nats.url "::bad"`,
		`nats: {url: "nats://a:4222, http://[::1", subject: k8s}`: `line 2: receiver "r": nats.url "nats://a:4222, http://[::1"`,
		`nats: {url: "nats://a:4222", subject: "k8s events"}`:     `line 2: receiver "r": nats.subject "k8s events"`,
		`nats: {url: "nats://a:4222", subject: "k8s.>"}`:          `line 2: receiver "r": nats.subject "k8s.>"`,
		`nats: {url: "nats://a:4222", subject: "k8s..events"}`:    `line 2: receiver "r": nats.subject "k8s..events"`,
	})
	parseOK(t, "receivers:\n  - name: r\n    nats: {url: \"a:4222, nats://b, tls://c:4443\", subject: k8s.events}\n")
}
