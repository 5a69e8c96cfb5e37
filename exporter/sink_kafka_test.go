package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newKafka starts franz-go's in-process Kafka cluster with topic
// "events" of 4 partitions.
func newKafka(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, "events")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newKafkaSink(t *testing.T, cfg KafkaConfig) *KafkaSink {
	t.Helper()
	return built(NewKafkaSink(cfg))(t)
}

// consumed is a record as a consumer reads it.
type consumed struct {
	partition int32
	key, idem string
	value     []byte
}

// consume reads n records of topic events from the start.
func consume(t *testing.T, c *kfake.Cluster, n int, opts ...kgo.Opt) []consumed {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("events")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out []consumed
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			idem := ""
			for _, h := range r.Headers {
				if h.Key == "idempotency-key" {
					idem = string(h.Value)
				}
			}
			out = append(out, consumed{partition: r.Partition, key: string(r.Key), idem: idem, value: r.Value})
		})
	}
	return out
}

// onObject returns occurrence uid/count about pod name.
func onObject(uid string, count int32, name string) *Occurrence {
	o := occ(uid, count, "ns")
	o.Regarding = ObjectRef{Kind: "Pod", Namespace: "ns", Name: name}
	return o
}

func TestKafkaKeysByObjectSoAnObjectsOccurrencesStayInOrderInOnePartition(t *testing.T) {
	c := newKafka(t)
	s := newKafkaSink(t, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events"})
	var batch []*Occurrence
	for count := int32(1); count <= 5; count++ {
		for _, pod := range []string{"web", "db", "cache", "queue"} {
			batch = append(batch, onObject("e-"+pod, count, pod))
		}
	}
	for i := 0; i < len(batch); i += 6 {
		part := batch[i:min(i+6, len(batch))]
		if n, err := s.Write(t.Context(), part); n != len(part) || err != nil {
			t.Fatal(n, err)
		}
	}
	partitionOf := map[string]int32{}
	lastCount := map[string]int32{}
	for _, r := range consume(t, c, len(batch)) {
		if p, seen := partitionOf[r.key]; seen && p != r.partition {
			t.Errorf("key %s in partitions %d and %d", r.key, p, r.partition)
		}
		partitionOf[r.key] = r.partition
		var rec struct {
			Count          int32
			InvolvedObject struct{ Name string }
		}
		if err := json.Unmarshal(r.value, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Count != lastCount[r.key]+1 || r.idem != fmt.Sprintf("e-%s/%d", rec.InvolvedObject.Name, rec.Count) {
			t.Errorf("key %s: count %d after %d, idempotency-key %s", r.key, rec.Count, lastCount[r.key], r.idem)
		}
		lastCount[r.key] = rec.Count
	}
	if len(partitionOf) != 4 || partitionOf["ns/Pod/web"] == partitionOf["ns/Pod/db"] &&
		partitionOf["ns/Pod/db"] == partitionOf["ns/Pod/cache"] && partitionOf["ns/Pod/cache"] == partitionOf["ns/Pod/queue"] {
		t.Errorf("partitions %v: want the four objects' keys, spread", partitionOf)
	}
}

func TestKafkaKeyEventIsTheEventUIDAndLayoutShapesTheValue(t *testing.T) {
	c := newKafka(t)
	cfg := parseOK(t, "receivers:\n  - name: k\n    kafka:\n      brokers: ["+c.ListenAddrs()[0]+"]\n      topic: events\n"+
		"      key: event\n      compressionCodec: zstd\n      layout: {reason: \"{{ .Reason }}\", kind: \"{{ .InvolvedObject.Kind }}\"}\n")
	s, err := cfg.Receivers[0].build("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	if n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	got := consume(t, c, 1)[0]
	if got.key != "e1" || string(got.value) != `{"kind":"Pod","reason":"Test"}` {
		t.Errorf("record key %s, value %s", got.key, got.value)
	}
}

func TestKafkaTooLargeRecordIsPermanentAfterTheStoredPrefix(t *testing.T) {
	c := newKafka(t)
	s := newKafkaSink(t, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events"})
	huge := onObject("e2", 1, "web")
	huge.Message = strings.Repeat("x", 2<<20) // over the producer's 1 MB batch limit
	n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web"), huge, onObject("e3", 1, "web")})
	if n != 1 || !IsPermanent(err) || !strings.Contains(err.Error(), "e2/1") {
		t.Fatalf("n %d, err %v; want 1 stored and a permanent error about e2/1", n, err)
	}
}

func TestKafkaUnreachableBrokersAreRetryable(t *testing.T) {
	c := newKafka(t)
	addrs := c.ListenAddrs()
	c.Close()
	s := newKafkaSink(t, KafkaConfig{Brokers: addrs, Topic: "events", Timeout: Duration(time.Second)})
	n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")})
	wantFailure(t, "unreachable", n, err, false)
}

func TestKafkaSASLPlainAuthenticates(t *testing.T) {
	c := newKafka(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "producer", "s3cret"))
	cfg := KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events"}
	cfg.SASL = KafkaSASL{Enable: true, Username: "producer", Password: "s3cret"}
	s := newKafkaSink(t, cfg)
	if n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if got := consume(t, c, 1, kgo.SASL(cfg.SASL.mechanism())); got[0].idem != "e1/1" {
		t.Errorf("consumed %+v", got)
	}
}

// kubernetes-event-exporter's later releases name the SCRAM mechanisms
// sha256 and sha512: those configurations authenticate with SCRAM.
func TestKafkaSASLScramAuthenticatesUnderTheirMechanismNames(t *testing.T) {
	for mech, method := range map[string]string{"sha256": "SCRAM-SHA-256", "sha512": "SCRAM-SHA-512", "scram-sha-512": "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			c := newKafka(t, kfake.EnableSASL(), kfake.Superuser(method, "producer", "s3cret"))
			cfg := KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events", Timeout: Duration(5 * time.Second)}
			cfg.SASL = KafkaSASL{Enable: true, Username: "producer", Password: "s3cret", Mechanism: mech}
			if p := cfg.validate(); len(p) != 0 {
				t.Fatalf("problems %q", p)
			}
			s := newKafkaSink(t, cfg)
			if n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
		})
	}
}

func TestKafkaTheirExampleLoadsAndBadKeysAreNamed(t *testing.T) {
	c, err := LoadConfig(theirs + "14-kafka.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k := c.Receivers[0].Kafka
	if k == nil || k.CompressionCodec != "snappy" || !k.TLS.Enable || k.TLS.CaFile != "kafka-ca.crt" ||
		!k.SASL.Enable || k.SASL.Username != "kube-event-producer" || k.Layout == nil {
		t.Errorf("kafka %+v", k)
	}
	wantConfigErrors(t, map[string]string{
		"kafka: {topic: t}":          "kafka.brokers is required",
		"kafka: {brokers: [b:9092]}": "kafka.topic is required",
		"kafka: {brokers: [b:9092], topic: t, compressionCodec: brotli}":  `kafka.compressionCodec "brotli" is unknown`,
		"kafka: {brokers: [b:9092], topic: t, version: banana}":           `kafka.version "banana"`,
		"kafka: {brokers: [b:9092], topic: t, timeout: 10ms}":             "kafka.timeout 10ms is shorter than 1s",
		"kafka: {brokers: [b:9092], topic: t, key: pod}":                  `kafka.key "pod" is unknown`,
		"kafka: {brokers: [b:9092], topic: t, avro: {schemaID: 1}}":       "kafka.avro.schema is required",
		"kafka: {brokers: [b:9092], topic: t, sasl: {mechanism: GSSAPI}}": `kafka.sasl.mechanism "GSSAPI"`,
	})
}

// A broker that takes a produce request and never answers fails the write
// once kafka.timeout has passed, retryable, as documented. franz-go's
// idempotent producer waits for that answer for ever, whatever its
// delivery timeout and the write's context say: the write never returned.
func TestKafkaTimeoutEndsAWriteToABrokerThatDoesNotAnswer(t *testing.T) {
	c := newKafka(t)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // taken, never answered
	})
	s := newKafkaSink(t, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events", Timeout: Duration(time.Second)})
	done := make(chan error, 1)
	go func() {
		n, err := s.Write(context.Background(), []*Occurrence{onObject("e1", 1, "web")})
		if n != 0 {
			err = fmt.Errorf("n %d: %w", n, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		wantFailure(t, "unanswered", 0, err, false)
	case <-time.After(time.Minute): // a guard, not the claim: the timeout is 1 s
		t.Fatal("the write has not returned")
	}
}

func TestKafkaSinkWithSeveralWritersStoresEachRecordOnce(t *testing.T) {
	c := newKafka(t)
	s := newKafkaSink(t, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "events"})
	want := writeConcurrently(t, s, 4, 10, 5)
	var got []string
	for _, r := range consume(t, c, len(want)) {
		got = append(got, r.idem)
	}
	wantEachOnce(t, got, want)
}
