package exporter

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/linkedin/goavro/v2"
)

// eventSchema is an Avro schema of the default record's fields that a test
// occurrence sets (see onObject), written as a kubernetes-event-exporter
// user writes one: nested records have every key of the JSON, a union
// takes a plain value.
const eventSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "reason", "type": "string"},
  {"name": "message", "type": "string"},
  {"name": "type", "type": "string"},
  {"name": "count", "type": "int"},
  {"name": "clusterName", "type": ["null", "string"], "default": null},
  {"name": "involvedObject", "type": {"type": "record", "name": "Object", "fields": [
    {"name": "kind", "type": "string"},
    {"name": "namespace", "type": ["null", "string"], "default": null},
    {"name": "name", "type": "string"},
    {"name": "deleted", "type": "boolean"}]}}]}`

// fakeRegistry is a recorded-API fake of Confluent's Schema Registry: it
// implements what its REST API documentation says of registering a
// schema under a subject (POST /subjects/{subject}/versions, answering the
// ID, the same ID for a schema registered again) and reading a subject's
// latest version (GET /subjects/{subject}/versions/latest), with its
// content type, its error bodies, and basic authentication when a
// password is set.
type fakeRegistry struct {
	*httptest.Server
	user, password string

	mu       sync.Mutex
	ids      map[string]int    // schema -> ID
	subjects map[string]string // subject -> latest schema
	requests int
	status   int // if set, every request fails with it
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	f := &fakeRegistry{ids: map[string]int{`"string"`: 1, `"long"`: 2}, subjects: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// set changes the registry under its lock.
func (f *fakeRegistry) set(change func(f *fakeRegistry)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	fail := func(status, code int, msg string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error_code":%d,"message":%q}`, code, msg)
	}
	if u, p, _ := r.BasicAuth(); f.password != "" && (u != f.user || p != f.password) {
		fail(http.StatusUnauthorized, 401, "Unauthorized")
		return
	}
	if f.status != 0 {
		fail(f.status, f.status*100, "failing on purpose")
		return
	}
	subject, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/subjects/"), "/")
	switch {
	case r.Method == http.MethodPost && rest == "versions":
		f.register(w, r, subject, fail)
	case r.Method == http.MethodGet && rest == "versions/latest":
		schema, ok := f.subjects[subject]
		if !ok {
			fail(http.StatusNotFound, 40401, "Subject '"+subject+"' not found.")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"subject": subject, "version": 1, "id": f.ids[schema], "schema": schema})
	default:
		fail(http.StatusNotFound, 404, "HTTP 404 Not Found")
	}
}

// register registers the schema of r's body under subject.
func (f *fakeRegistry) register(w http.ResponseWriter, r *http.Request, subject string, fail func(int, int, string)) {
	var req struct{ Schema string }
	body, _ := io.ReadAll(r.Body)
	if ct := r.Header.Get("Content-Type"); ct != "application/vnd.schemaregistry.v1+json" && ct != "application/json" {
		fail(http.StatusUnsupportedMediaType, 415, "unsupported content type "+ct)
		return
	}
	if json.Unmarshal(body, &req) != nil {
		fail(http.StatusUnprocessableEntity, 42201, "Invalid schema")
		return
	}
	if _, err := goavro.NewCodec(req.Schema); err != nil {
		fail(http.StatusUnprocessableEntity, 42201, "Invalid schema: "+err.Error())
		return
	}
	id, ok := f.ids[req.Schema]
	if !ok {
		id = len(f.ids) + 1
		f.ids[req.Schema] = id
	}
	f.subjects[subject] = req.Schema
	_ = json.NewEncoder(w).Encode(map[string]int{"id": id})
}

// avroReceiver builds the sink of a kafka receiver of topic events on c
// with the YAML body of its avro key, and the configuration's warnings.
func avroReceiver(t *testing.T, brokers, avro string, more ...string) (Sink, []string) {
	t.Helper()
	schema, _ := json.Marshal(eventSchema)
	avro = strings.ReplaceAll(avro, "SCHEMA", string(schema))
	c := parseOK(t, "receivers:\n  - name: k\n    kafka:\n      brokers: ["+brokers+"]\n      topic: events\n"+
		"      avro: "+avro+"\n"+strings.Join(more, ""))
	s, err := c.Receivers[0].build("prod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	return s, otherWarnings(c.Warnings)
}

// decodeAvro decodes an Avro value of eventSchema.
func decodeAvro(t *testing.T, data []byte) map[string]any {
	t.Helper()
	codec, err := goavro.NewCodec(eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	native, rest, err := codec.NativeFromBinary(data)
	if err != nil || len(rest) != 0 {
		t.Fatalf("avro data %x: %v, %d bytes left", data, err, len(rest))
	}
	return native.(map[string]any)
}

// wantEvent checks that a decoded value is the record of onObject(uid,
// 1, name) with cluster name prod.
func wantEvent(t *testing.T, v map[string]any, name string) {
	t.Helper()
	obj := v["involvedObject"].(map[string]any)
	if v["reason"] != "Test" || v["count"] != int32(1) || obj["name"] != name ||
		fmt.Sprint(v["clusterName"]) != "map[string:prod]" || fmt.Sprint(obj["namespace"]) != "map[string:ns]" {
		t.Errorf("value %v, want the record of %s", v, name)
	}
}

// kubernetes-event-exporter's framing: a zero byte, the 16 bytes of the
// 32-digit schema ID, the Avro data of the record (less its "fanout"
// object, which their schema has no field for).
func TestKafkaAvroWithTheirSchemaIDFramesTheValueAsTheyDo(t *testing.T) {
	c := newKafka(t)
	const id = "0123456789abcdef0123456789abcdef"
	s, _ := avroReceiver(t, c.ListenAddrs()[0], "{schemaID: "+id+", schema: SCHEMA}")
	if n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web"), onObject("e2", 1, "db")}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	want, _ := hex.DecodeString(id)
	for i, r := range consume(t, c, 2) {
		if r.value[0] != 0 || !bytes.Equal(r.value[1:17], want) {
			t.Fatalf("value %x: want 0, then %s", r.value, id)
		}
		wantEvent(t, decodeAvro(t, r.value[17:]), []string{"web", "db"}[i])
	}
}

// Confluent's wire format: a zero byte, the ID the registry gave the
// schema (4 bytes, big-endian), the Avro data. The registry is asked once.
func TestKafkaAvroRegistersTheSchemaAndUsesConfluentsWireFormat(t *testing.T) {
	c, reg := newKafka(t), newFakeRegistry(t)
	reg.set(func(f *fakeRegistry) { f.user, f.password = "u", "p" })
	s, _ := avroReceiver(t, c.ListenAddrs()[0], "{schema: SCHEMA, registry: {url: "+reg.URL+", username: u, password: p}}")
	for _, name := range []string{"web", "db"} {
		if n, err := s.Write(t.Context(), []*Occurrence{onObject("e-"+name, 1, name)}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	var id, requests int
	var subject string
	reg.set(func(f *fakeRegistry) {
		id, requests, subject = f.ids[eventSchema], f.requests, f.subjects["events-value"]
	})
	if id != 3 || requests != 1 || subject != eventSchema {
		t.Fatalf("schema ID %d after %d requests, subject events-value %q; want 3 after 1", id, requests, subject)
	}
	for i, r := range consume(t, c, 2) {
		if r.value[0] != 0 || binary.BigEndian.Uint32(r.value[1:5]) != 3 {
			t.Fatalf("value %x: want 0, then ID 3", r.value)
		}
		wantEvent(t, decodeAvro(t, r.value[5:]), []string{"web", "db"}[i])
	}
}

// Without a schema, the subject's latest version gives the ID and the
// schema; with a numeric schemaID and no registry, that ID is used.
func TestKafkaAvroTakesTheLatestSchemaOfTheSubjectOrTheConfiguredID(t *testing.T) {
	c, reg := newKafka(t), newFakeRegistry(t)
	reg.set(func(f *fakeRegistry) { f.ids[eventSchema], f.subjects["kube"] = 9, eventSchema })
	s, _ := avroReceiver(t, c.ListenAddrs()[0], "{registry: {url: "+reg.URL+", subject: kube}}")
	t2, _ := avroReceiver(t, c.ListenAddrs()[0], "{schemaID: 42, schema: SCHEMA}")
	for _, sink := range []Sink{s, t2} {
		if n, err := sink.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	for i, r := range consume(t, c, 2) {
		if id := binary.BigEndian.Uint32(r.value[1:5]); r.value[0] != 0 || id != []uint32{9, 42}[i] {
			t.Errorf("value %d: %x, want ID %d", i, r.value, []uint32{9, 42}[i])
		}
		wantEvent(t, decodeAvro(t, r.value[5:]), "web")
	}
}

// A record that does not fit the schema is dropped, as theirs drops it,
// after the records before it; a nested key the schema lacks does not fit.
func TestKafkaAvroRecordThatDoesNotFitIsPermanentAfterThePrefix(t *testing.T) {
	c := newKafka(t)
	s, _ := avroReceiver(t, c.ListenAddrs()[0], "{schemaID: 7, schema: SCHEMA}")
	bad := onObject("e2", 1, "db")
	bad.Regarding.UID = "u-1" // involvedObject.uid: not in the schema
	n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web"), bad})
	if n != 1 || !IsPermanent(err) || !strings.Contains(err.Error(), "e2/1") || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("n %d, err %v; want 1 stored and a permanent error about e2/1", n, err)
	}
}

func TestKafkaAvroRegistryFailuresAreRetryableOrPermanentByStatus(t *testing.T) {
	c, reg := newKafka(t), newFakeRegistry(t)
	s, _ := avroReceiver(t, c.ListenAddrs()[0], "{registry: {url: "+reg.URL+", subject: missing}}")
	n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")})
	wantFailure(t, "subject not found", n, err, true)
	reg.set(func(f *fakeRegistry) { f.status = http.StatusServiceUnavailable })
	s, _ = avroReceiver(t, c.ListenAddrs()[0], "{schema: SCHEMA, registry: {url: "+reg.URL+"}}")
	n, err = s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")})
	wantFailure(t, "registry unavailable", n, err, false)
	s, _ = avroReceiver(t, c.ListenAddrs()[0], "{schema: SCHEMA, registry: {url: http://"+deadAddr()+"}}")
	n, err = s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")})
	wantFailure(t, "registry unreachable", n, err, false)
}

// As in kubernetes-event-exporter, a layout wins over avro: the values
// are the layout's JSON, and the configuration says so.
func TestKafkaAvroWithALayoutWritesTheLayoutsJSONWithAWarning(t *testing.T) {
	c := newKafka(t)
	s, warnings := avroReceiver(t, c.ListenAddrs()[0], "{schemaID: 7, schema: SCHEMA}", "      layout: {r: \"{{ .Reason }}\"}\n")
	if n, err := s.Write(t.Context(), []*Occurrence{onObject("e1", 1, "web")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if got := consume(t, c, 1)[0]; string(got.value) != `{"r":"Test"}` || len(warnings) != 1 ||
		!strings.Contains(warnings[0], "kafka.avro is not applied: a layout is set") {
		t.Errorf("value %s, warnings %q", got.value, warnings)
	}
}

func TestKafkaAvroBadKeysAreNamed(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"kafka: {brokers: [b:9092], topic: t, avro: {schema: '\"string\"'}}":                        "set schemaID (and schema), or registry",
		"kafka: {brokers: [b:9092], topic: t, avro: {schemaID: abc, schema: '\"string\"'}}":         `kafka.avro.schemaID "abc" is neither`,
		"kafka: {brokers: [b:9092], topic: t, avro: {schemaID: 7}}":                                 "kafka.avro.schema is required",
		"kafka: {brokers: [b:9092], topic: t, avro: {schemaID: 7, schema: '{\"type\": \"nope\"}'}}": "kafka.avro.schema: ",
		"kafka: {brokers: [b:9092], topic: t, avro: {schemaID: 7, registry: {url: http://r}}}":      "set schemaID or registry, not both",
		"kafka: {brokers: [b:9092], topic: t, avro: {registry: {url: ftp://r}}}":                    `kafka.avro.registry.url "ftp://r"`,
	})
}
