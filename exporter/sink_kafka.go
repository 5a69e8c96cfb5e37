package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaConfig configures a kafka receiver (kubernetes-event-exporter's
// keys, and key, timeout and sasl.mechanism): each occurrence is one
// record of Topic, produced with franz-go's idempotent producer.
type KafkaConfig struct {
	// Brokers are the seed brokers (host:port).
	Brokers []string `yaml:"brokers"`
	// Topic is the topic produced to.
	Topic string `yaml:"topic"`
	// ClientID is the client ID the brokers see (default fanout-eventer).
	ClientID string `yaml:"clientId"`
	// CompressionCodec is none (the default), gzip, snappy, lz4 or zstd.
	CompressionCodec string `yaml:"compressionCodec"`
	// Version caps the protocol version to a Kafka release ("2.8.0");
	// by default the versions are negotiated with the brokers.
	Version string `yaml:"version"`
	// Key is what the record key is: object (the default: the involved
	// object's namespace/kind/name, so that an object's occurrences stay
	// in one partition, in order) or event (the event's UID, as
	// kubernetes-event-exporter).
	Key string `yaml:"key"`
	// TLS, when enabled, encrypts the connections.
	TLS KafkaTLS `yaml:"tls"`
	// SASL, when enabled, authenticates the client.
	SASL KafkaSASL `yaml:"sasl"`
	// Avro, if set, encodes the record values in Avro (see [KafkaAvro]).
	// As in kubernetes-event-exporter, a layout takes precedence: with
	// both, the values are the layout's JSON (with a warning).
	Avro *KafkaAvro `yaml:"avro"`
	// Timeout bounds the delivery of a write's records (default 10 s);
	// then the write fails and the receiver's policy retries it.
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the record values.
	Payload `yaml:",inline"`
	// Encode makes each record value; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

// KafkaTLS is a kafka receiver's TLS configuration.
type KafkaTLS struct {
	// Enable turns TLS on.
	Enable bool `yaml:"enable"`
	// TLSConfig has the files and options, as a webhook's.
	TLSConfig `yaml:",inline"`
}

// KafkaSASL is a kafka receiver's SASL authentication.
type KafkaSASL struct {
	// Enable turns SASL on.
	Enable bool `yaml:"enable"`
	// Username and Password are the credentials.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Mechanism is PLAIN (the default, kubernetes-event-exporter's),
	// SCRAM-SHA-256 or SCRAM-SHA-512, in any case; sha256 and sha512,
	// kubernetes-event-exporter's later names, name the SCRAM ones.
	Mechanism string `yaml:"mechanism"`
}

// The record keys of a kafka receiver.
const (
	// KafkaKeyObject keys records by involved object.
	KafkaKeyObject = "object"
	// KafkaKeyEvent keys records by event UID.
	KafkaKeyEvent = "event"
)

// codecs are the compression codecs by their configuration name.
var codecs = map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}

func (c *KafkaConfig) validate() []string {
	var p []string
	if len(c.Brokers) == 0 {
		p = append(p, "kafka.brokers is required")
	}
	if c.Topic == "" {
		p = append(p, "kafka.topic is required")
	}
	if _, ok := codecs[c.CompressionCodec]; !ok && c.CompressionCodec != "" {
		p = append(p, fmt.Sprintf("kafka.compressionCodec %q is unknown (want none, gzip, snappy, lz4 or zstd)", c.CompressionCodec))
	}
	if c.Version != "" && kversion.FromString(c.Version) == nil {
		p = append(p, fmt.Sprintf("kafka.version %q is not a Kafka version such as 2.8.0", c.Version))
	}
	if c.Key != "" && c.Key != KafkaKeyObject && c.Key != KafkaKeyEvent {
		p = append(p, fmt.Sprintf("kafka.key %q is unknown (want object or event)", c.Key))
	}
	switch c.SASL.canonical() {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		p = append(p, fmt.Sprintf("kafka.sasl.mechanism %q is unknown (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; "+
			"sha256 and sha512 name the SCRAM ones)", c.SASL.Mechanism))
	}
	if c.Avro != nil {
		p = append(p, c.Avro.validate(c.Topic)...)
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(10 * time.Second)
	}
	if c.Timeout < Duration(time.Second) { // franz-go's least delivery timeout
		p = append(p, fmt.Sprintf("kafka.timeout %v is shorter than 1s", time.Duration(c.Timeout)))
	}
	return append(p, c.TLS.validate("kafka")...)
}

// warnings returns the configuration's warnings.
func (c *KafkaConfig) warnings() []string {
	if c.Avro != nil && c.Layout != nil {
		return []string{"kafka.avro is not applied: a layout is set, and the values are the layout's JSON, " +
			"as in kubernetes-event-exporter (remove the layout to encode the records in Avro)"}
	}
	return nil
}

// options returns the client's options.
func (c *KafkaConfig) options() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.DefaultProduceTopic(c.Topic),
		kgo.ClientID(cmp.Or(c.ClientID, "fanout-eventer")),
		kgo.RecordDeliveryTimeout(time.Duration(c.Timeout)), kgo.ProducerLinger(0)}
	if codec, ok := codecs[c.CompressionCodec]; ok {
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	if c.Version != "" {
		opts = append(opts, kgo.MaxVersions(kversion.FromString(c.Version)))
	}
	if c.TLS.Enable {
		tc, err := c.TLS.clientTLS("kafka")
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL.Enable {
		opts = append(opts, kgo.SASL(c.SASL.mechanism()))
	}
	return opts, nil
}

// canonical returns the name of the SASL mechanism, upper case, with
// kubernetes-event-exporter's names of the SCRAM ones (sha256, sha512)
// mapped to theirs; PLAIN if none is given.
func (s KafkaSASL) canonical() string {
	switch m := strings.ToUpper(s.Mechanism); m {
	case "":
		return "PLAIN"
	case "SHA256":
		return "SCRAM-SHA-256"
	case "SHA512":
		return "SCRAM-SHA-512"
	default:
		return m
	}
}

// mechanism returns the SASL mechanism.
func (s KafkaSASL) mechanism() sasl.Mechanism {
	scr := scram.Auth{User: s.Username, Pass: s.Password}
	switch s.canonical() {
	case "SCRAM-SHA-256":
		return scr.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scr.AsSha512Mechanism()
	}
	return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
}

// KafkaSink produces occurrences to a Kafka topic. A record's key is the
// involved object (or the event's UID, with key: event), so that one
// object's occurrences go to one partition, in order; its header
// idempotency-key is the occurrence's key, so that a consumer can discard
// what a crash made the exporter produce twice (the idempotent producer
// already discards the duplicates of its own retries).
//
// A record the brokers or the client refuse as invalid or too large, or
// that the topic's ACL forbids, is [Permanent]; any other failure (no
// broker reachable within the timeout, leader changes) is retried.
type KafkaSink struct {
	cfg    KafkaConfig
	client *kgo.Client
	avro   *avroEncoder // nil: JSON values
}

// NewKafkaSink returns a Kafka sink; it connects to the brokers at the
// first write.
func NewKafkaSink(cfg KafkaConfig) (*KafkaSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	s := &KafkaSink{cfg: cfg}
	if cfg.Avro != nil && cfg.Layout == nil {
		if s.avro, err = newAvroEncoder(*cfg.Avro); err != nil {
			return nil, err
		}
	}
	if s.client, err = kgo.NewClient(opts...); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return s, nil
}

// recordKey returns the record key of o.
func (s *KafkaSink) recordKey(o *Occurrence) []byte {
	if s.cfg.Key == KafkaKeyEvent {
		return []byte(o.UID)
	}
	r := o.Regarding
	return []byte(r.Namespace + "/" + r.Kind + "/" + r.Name)
}

// Write produces the batch and waits for every record's acknowledgement;
// it returns how many records, from the start, were stored before the
// first that failed. An occurrence that cannot be encoded ends the batch
// there.
func (s *KafkaSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	enc := s.cfg.Encode
	if s.avro != nil {
		var err error
		if enc, err = s.avro.wrap(ctx, enc); err != nil {
			return 0, err
		}
	}
	recs := make([]*kgo.Record, 0, len(batch))
	_, encErr := encodeEach(batch, enc, func(_ int, o *Occurrence, v []byte) {
		recs = append(recs, &kgo.Record{Key: s.recordKey(o), Value: v,
			Headers: []kgo.RecordHeader{{Key: "idempotency-key", Value: []byte(o.Key())}}})
	})
	n, err := len(recs), error(nil)
	results := s.produce(ctx, recs)
	if i := slices.IndexFunc(results, func(err error) bool { return err != nil }); i >= 0 {
		n, err = i, results[i]
	}
	if err != nil {
		err = fmt.Errorf("kafka: occurrence %s: %w", batch[n].Key(), err)
		if kafkaPermanent(err) {
			err = Permanent(err)
		}
		return n, err
	}
	return n, encErr
}

// produce hands recs to the client and returns their results, index by
// index, once every one is known, the delivery timeout has passed, or ctx
// has ended: a record not confirmed by then has errUnconfirmed (or ctx's
// error), retryable. franz-go's idempotent producer does not fail a record
// whose request is in flight without an answer, however long it waits
// (RecordDeliveryTimeout and ProduceSync's context only apply when that is
// safe), so a broker that stops answering would hold the write for ever.
// A record given up on may still be stored later, and again by the retry:
// its idempotency-key header tells the copies apart. The returned slice is
// the write's own (several writers write at once); callbacks that come
// later write to another one.
func (s *KafkaSink) produce(ctx context.Context, recs []*kgo.Record) []error {
	res := &produceResults{errs: make([]error, len(recs)), done: make(chan struct{})}
	res.left.Store(int64(len(recs)))
	for i := range res.errs {
		res.errs[i] = errUnconfirmed
	}
	if len(recs) == 0 {
		close(res.done)
	}
	for i, r := range recs {
		s.client.Produce(ctx, r, func(_ *kgo.Record, err error) { res.set(i, err) })
	}
	t := time.NewTimer(time.Duration(s.cfg.Timeout))
	defer t.Stop()
	select {
	case <-res.done:
	case <-t.C:
	case <-ctx.Done():
	}
	res.mu.Lock()
	out := slices.Clone(res.errs)
	res.mu.Unlock()
	if err := ctx.Err(); err != nil {
		for i, e := range out {
			if e == errUnconfirmed {
				out[i] = err
			}
		}
	}
	return out
}

// errUnconfirmed is the error of a record whose delivery the broker did not
// confirm within the timeout.
var errUnconfirmed = errors.New("delivery not confirmed within kafka.timeout")

// produceResults are the results of one write's records, set by the
// client's callbacks.
type produceResults struct {
	mu   sync.Mutex
	errs []error
	left atomic.Int64
	done chan struct{}
}

func (r *produceResults) set(i int, err error) {
	r.mu.Lock()
	r.errs[i] = err
	r.mu.Unlock()
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
}

// kafkaPermanent reports whether retrying cannot make a record's produce
// succeed.
func kafkaPermanent(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.CorruptMessage, kerr.InvalidTopicException, kerr.TopicAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close flushes nothing (every write waits for its records) and closes
// the client.
func (s *KafkaSink) Close(context.Context) error {
	s.client.Close()
	return nil
}
