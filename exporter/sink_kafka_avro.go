package exporter

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/linkedin/goavro/v2"
)

// KafkaAvro is a kafka receiver's Avro encoding (its avro key): each
// record value is the receiver's JSON record encoded in Avro's binary
// form, after a header that names the schema, in one of two framings:
//
//   - kubernetes-event-exporter's: SchemaID is 32 hexadecimal digits, and
//     a value is a zero byte, those 16 bytes, then the Avro data; Schema
//     is the schema.
//   - Confluent's wire format, which Confluent's and most other Kafka
//     deserializers read: a zero byte, the schema's ID in the Schema
//     Registry (4 bytes, big-endian), then the Avro data. The ID is
//     SchemaID when it is a decimal number; or, with Registry, the ID
//     under which the registry has Schema (registered under the subject
//     if need be), or, without Schema, the ID and schema of the subject's
//     latest version.
//
// The JSON record is read against the schema as kubernetes-event-exporter
// reads it (goavro's standard-JSON codec: a union takes a plain value):
// a record that does not fit the schema is [Permanent]. Unlike theirs,
// top-level keys that a record schema has no field for are left out (such
// as the "fanout" object of the default record) rather than refused.
type KafkaAvro struct {
	// SchemaID names the schema: 32 hexadecimal digits
	// (kubernetes-event-exporter's framing) or a Schema Registry ID.
	SchemaID string `yaml:"schemaID"`
	// Schema is the Avro schema (JSON).
	Schema string `yaml:"schema"`
	// Registry is the Confluent Schema Registry that gives the schema's
	// ID.
	Registry *SchemaRegistry `yaml:"registry"`
}

// SchemaRegistry is a Confluent Schema Registry (its REST API).
type SchemaRegistry struct {
	// URL is the registry's base URL.
	URL string `yaml:"url"`
	// Subject is the subject of the schema (default <topic>-value, the
	// topic name strategy of Confluent's serializers).
	Subject string `yaml:"subject"`
	// Username and Password, if set, authenticate with HTTP basic
	// authentication.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS configures the connection to an https registry.
	TLS *TLSConfig `yaml:"tls"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
}

// validate returns the problems of the Avro configuration of a topic.
func (a *KafkaAvro) validate(topic string) []string {
	var p []string
	_, hexErr := a.theirID()
	_, idErr := a.confluentID()
	switch {
	case a.Registry == nil && a.SchemaID == "":
		p = append(p, "kafka.avro: set schemaID (and schema), or registry")
	case a.Registry != nil && a.SchemaID != "":
		p = append(p, "kafka.avro: set schemaID or registry, not both")
	case a.SchemaID != "" && hexErr != nil && idErr != nil:
		p = append(p, fmt.Sprintf("kafka.avro.schemaID %q is neither 32 hexadecimal digits (kubernetes-event-exporter's) "+
			"nor a schema registry ID (a number up to %d)", a.SchemaID, math.MaxInt32))
	case a.Registry == nil && a.Schema == "":
		p = append(p, "kafka.avro.schema is required with schemaID")
	}
	if a.Schema != "" {
		if _, err := newAvroCodec(a.Schema); err != nil {
			p = append(p, fmt.Sprintf("kafka.avro.schema: %v", err))
		}
	}
	if r := a.Registry; r != nil {
		p = appendProblem(p, httpURLProblem("kafka.avro.registry.url", r.URL))
		if r.Subject == "" {
			r.Subject = topic + "-value"
		}
		p = append(p, connectionProblems("kafka.avro.registry", &r.Timeout, r.TLS)...)
	}
	return p
}

// theirID returns the 16 bytes of a kubernetes-event-exporter schema ID.
func (a *KafkaAvro) theirID() ([]byte, error) {
	if len(a.SchemaID) != 32 {
		return nil, errors.New("not 32 digits")
	}
	return hex.DecodeString(a.SchemaID)
}

// confluentID returns a Schema Registry ID.
func (a *KafkaAvro) confluentID() (int, error) {
	id, err := strconv.ParseInt(a.SchemaID, 10, 32)
	if err != nil || id < 0 {
		return 0, errors.New("not a schema ID")
	}
	return int(id), nil
}

// avroCodec encodes JSON records with one schema.
type avroCodec struct {
	codec  *goavro.Codec
	fields map[string]bool // a record schema's fields; nil for another schema
}

// newAvroCodec compiles schema with goavro's standard-JSON codec,
// kubernetes-event-exporter's.
func newAvroCodec(schema string) (*avroCodec, error) {
	codec, err := goavro.NewCodecForStandardJSON(schema)
	if err != nil {
		return nil, err
	}
	c := &avroCodec{codec: codec}
	var rec struct {
		Type   any `json:"type"`
		Fields []struct {
			Name string `json:"name"`
		} `json:"fields"`
	}
	if json.Unmarshal([]byte(schema), &rec) == nil && rec.Type == "record" {
		c.fields = map[string]bool{}
		for _, f := range rec.Fields {
			c.fields[f.Name] = true
		}
	}
	return c, nil
}

// encode appends to header the Avro binary of the JSON record.
func (c *avroCodec) encode(header, record []byte) ([]byte, error) {
	if c.fields != nil {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(record, &top); err != nil {
			return nil, fmt.Errorf("avro: the record is not a JSON object: %w", err)
		}
		n := len(top)
		for k := range top {
			if !c.fields[k] {
				delete(top, k)
			}
		}
		if len(top) != n {
			record, _ = json.Marshal(top)
		}
	}
	native, _, err := c.codec.NativeFromTextual(record)
	if err != nil {
		return nil, fmt.Errorf("avro: the record does not fit the schema: %w", err)
	}
	return c.codec.BinaryFromNative(header, native)
}

// avroEncoder is a kafka sink's Avro encoding: its codec and header,
// known at once or asked of the registry at the first write.
type avroEncoder struct {
	cfg      KafkaAvro
	registry *http.Client // nil without a registry

	mu     sync.Mutex // guards what follows
	codec  *avroCodec
	header []byte
}

// newAvroEncoder returns the encoder of cfg, validated.
func newAvroEncoder(cfg KafkaAvro) (*avroEncoder, error) {
	e := &avroEncoder{cfg: cfg}
	if r := cfg.Registry; r != nil {
		tr, err := httpTransport("kafka.avro.registry", r.TLS)
		if err != nil {
			return nil, err
		}
		e.registry = &http.Client{Transport: tr, Timeout: time.Duration(r.Timeout)}
		return e, nil
	}
	codec, err := newAvroCodec(cfg.Schema)
	if err != nil {
		return nil, err
	}
	e.codec = codec
	if id, err := cfg.theirID(); err == nil {
		e.header = append([]byte{0}, id...)
	} else {
		id, _ := cfg.confluentID()
		e.header = confluentHeader(id)
	}
	return e, nil
}

// confluentHeader returns the header of Confluent's wire format for
// schema ID id.
func confluentHeader(id int) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
}

// wrap returns an encoder that encodes enc's JSON records in Avro, asking
// the registry for the schema's ID first if need be (an error is
// retryable, or [Permanent] for a 4xx answer).
func (e *avroEncoder) wrap(ctx context.Context, enc Encoder) (Encoder, error) {
	codec, header, err := e.ready(ctx)
	if err != nil {
		return nil, err
	}
	enc = enc.orDefault()
	return func(o *Occurrence) ([]byte, error) {
		rec, err := enc(o)
		if err != nil {
			return nil, err
		}
		return codec.encode(bytes.Clone(header), rec)
	}, nil
}

// ready returns the codec and header, asking the registry once.
func (e *avroEncoder) ready(ctx context.Context) (*avroCodec, []byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.codec != nil {
		return e.codec, e.header, nil
	}
	id, schema, err := e.lookup(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: schema registry %s: %w", e.cfg.Registry.URL, err)
	}
	codec, err := newAvroCodec(schema)
	if err != nil {
		return nil, nil, Permanent(fmt.Errorf("kafka: schema %d of the registry: %w", id, err))
	}
	e.codec, e.header = codec, confluentHeader(id)
	return e.codec, e.header, nil
}

// lookup registers the configured schema under the subject (the registry
// answers the existing ID if it has it), or reads the subject's latest
// version without a configured schema.
func (e *avroEncoder) lookup(ctx context.Context) (int, string, error) {
	r := e.cfg.Registry
	path := "/subjects/" + url.PathEscape(r.Subject) + "/versions"
	var body []byte
	if e.cfg.Schema != "" {
		body, _ = json.Marshal(map[string]string{"schema": e.cfg.Schema})
	} else {
		path += "/latest"
	}
	var answer struct {
		ID     int    `json:"id"`
		Schema string `json:"schema"`
	}
	if err := e.call(ctx, path, body, &answer); err != nil {
		return 0, "", err
	}
	return answer.ID, cmp.Or(e.cfg.Schema, answer.Schema), nil
}

// call makes a registry request (a POST of body, or a GET without) and
// decodes its JSON answer into out.
func (e *avroEncoder) call(ctx context.Context, path string, body []byte, out any) error {
	r := e.cfg.Registry
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(r.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	if r.Username != "" || r.Password != "" {
		req.SetBasicAuth(r.Username, r.Password)
	}
	resp, err := e.registry.Do(req)
	if err != nil {
		return err
	}
	answer := readAnswer(resp, 1<<20)
	if err := statusError(method+" "+path, resp, answer, retryableStatus); err != nil {
		return err
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}
