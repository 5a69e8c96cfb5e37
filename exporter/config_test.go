package exporter

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

const exampleConfig = `
logLevel: info
checkpoint:
  file: /tmp/ck.json
  interval: 1s
route:
  drop:
    - namespace: "^kube-system$"
  match:
    - receiver: dump
  routes:
    - match:
        - type: Warning
          receiver: alerts
        - minCount: 3
          receiver: bus
receivers:
  - name: dump
    file:
      path: /tmp/events.jsonl
      maxsize: 10
  - name: alerts
    webhook:
      endpoint: http://127.0.0.1:9/hook
      headers: {X-Team: sre}
    batch: 10
    queue: {length: 50, strategy: DropOldest}
    retry: {maxTries: 0, initialBackoff: 100ms, maxBackoff: 2s}
  - name: bus
    nats: {url: "nats://127.0.0.1:4222", subject: k8s.events}
`

func TestParseConfigReadsRoutesReceiversAndDefaults(t *testing.T) {
	c, err := ParseConfig("example.yaml", []byte(exampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.API != CoreV1 || time.Duration(c.Checkpoint.Interval) != time.Second || time.Duration(c.ShutdownTimeout) != DefaultShutdownTimeout {
		t.Errorf("api %q, interval %v, shutdown %v", c.API, c.Checkpoint.Interval, c.ShutdownTimeout)
	}
	dump, alerts, bus := c.Receivers[0], c.Receivers[1], c.Receivers[2]
	if dump.Queue != (Queue{Length: 1000, Strategy: StrategyWait}) || dump.Batch != 256 || dump.File.MaxBytes != 10<<20 {
		t.Errorf("file receiver: queue %+v, batch %d, max bytes %d", dump.Queue, dump.Batch, dump.File.MaxBytes)
	}
	if alerts.Queue.Strategy != StrategyDropOldest || alerts.Queue.Length != 50 || alerts.Batch != 10 ||
		alerts.Retry != (Retry{MaxTries: 0, Initial: 100 * time.Millisecond, Max: 2 * time.Second}) {
		t.Errorf("webhook receiver: queue %+v, batch %d, retry %+v", alerts.Queue, alerts.Batch, alerts.Retry)
	}
	if bus.Retry != DefaultRetry || bus.NATS.Subject != "k8s.events" {
		t.Errorf("nats receiver: retry %+v, subject %q", bus.Retry, bus.NATS.Subject)
	}
}

func TestParseConfigNamesTheLineOfEveryProblem(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"regexp not a string", "route:\n  match:\n    - reason: [a]\n      receiver: a\nreceivers:\n  - name: a\n    stdout: {}\n",
			[]string{`line 3: expected a regular expression`}},
		{"unknown receiver", "route:\n  match:\n    - receiver: nope\nreceivers:\n  - name: a\n    stdout: {}\n",
			[]string{`line 3: unknown receiver "nope"`}},
		{"bad duration", "checkpoint:\n  interval: soon\nreceivers:\n  - name: a\n    stdout: {}\n",
			[]string{`line 2: invalid duration "soon"`}},
		{"wrong type", "receivers:\n  - name: a\n    stdout: {}\n    batch: many\n", []string{"line 4: cannot unmarshal"}},
		{"no sink", "receivers:\n  - name: a\n    batch: 2\n", []string{`line 2: receiver "a": a sink is required`}},
		{"duplicate receiver", "receivers:\n  - name: a\n    stdout: {}\n  - name: a\n    stdout: {}\n",
			[]string{`line 4: receiver "a" is already defined at line 2`}},
		{"bad strategy", "receivers:\n  - name: a\n    stdout: {}\n    queue: {strategy: Sometimes}\n",
			[]string{`line 2: receiver "a": queue.strategy "Sometimes" is unknown`}},
		{"labels not a map", "route:\n  match:\n    - labels: [app]\n      receiver: a\nreceivers:\n  - name: a\n    stdout: {}\n",
			[]string{"line 3: expected a map"}},
		{"webhook without url", "receivers:\n  - name: w\n    webhook: {endpoint: \"ftp://x\"}\n",
			[]string{`line 2: receiver "w": webhook.endpoint "ftp://x" is not an http or https URL`}},
		{"not yaml", "receivers: [\n", []string{"line 1: sequence end token ']' not found (column 12)"}},
		{"no receivers", "logLevel: info\n", []string{"receivers: at least one receiver is required"}},
		{"several at once", "route:\n  match:\n    - receiver: x\n    - kind: [1]\nreceivers:\n  - name: a\n    stdout: {}\n",
			[]string{`line 3: unknown receiver "x"`, `line 4: expected a regular expression`}},
		{"top-level values", "receivers:\n  - name: a\n    stdout: {}\napi: v2\ncacheSize: -1\nlogLevel: loud\nlogFormat: xml\n" +
			"checkpoint: {file: f, configMap: {namespace: n, name: c}}\n",
			[]string{`line 4: api: unknown API "v2"`, `line 5: cacheSize: -1 is negative`, `line 6: logLevel: unknown level "loud"`,
				`line 7: logFormat: unknown format "xml"`, `line 8: checkpoint: set file or configMap, not both`}},
		{"empty receivers", "logLevel: info\nreceivers: []\n", []string{"line 2: receivers: at least one receiver is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("c.yaml", []byte(tc.yaml))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "invalid configuration c.yaml:") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func FuzzParseConfigNeverPanics(f *testing.F) {
	f.Add([]byte(exampleConfig))
	f.Add([]byte("route: {routes: [{routes: [{}]}]}\nreceivers: [{name: a, stdout: {}}]"))
	f.Add([]byte("receivers: [null, {name: \"\xff\", log: {}}]"))
	f.Add([]byte("receivers: [{name: s, slack: {}}, {name: w, webhook: {endpoint: \"http://x\", tls: {}, layout: {a: [\"{{ .Reason }}\", 1, {b: null}]}}}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("fuzz", b)
		if err == nil && len(c.Receivers) == 0 {
			t.Error("a configuration without receivers was accepted")
		}
	})
}

// kubernetes-event-exporter's YAML decoding (gopkg.in/yaml.v2, or
// goccy/go-yaml without DisallowDuplicateKey) takes the last value of a
// key set twice in a mapping; yaml.v3 refuses it. Ours loads it as
// theirs, with a warning naming the key and both lines, and still warns
// about unknown keys, merged ones included.
func TestDuplicateKeyTakesTheLastValueWithAWarning(t *testing.T) {
	c := parseOK(t, `
base: &base {colour: red}
receivers:
  - name: w
    webhook:
      endpoint: http://hook.example/
      headers:
        X-Team: sre
        X-Team: ops
    batch: 1
    batch: 4
    <<: *base
logLevel: debug
logLevel: warn
`)
	if r := c.Receivers[0]; r.Webhook.Headers["X-Team"] != "ops" || len(r.Webhook.Headers) != 1 || r.Batch != 4 || c.LogLevel != "warn" {
		t.Errorf("headers %v, batch %d, logLevel %s; want the last values", r.Webhook.Headers, r.Batch, c.LogLevel)
	}
	wantWarnings(t, c, `line 8: key "X-Team" is set again at line 9: the last value is used`,
		`line 10: key "batch" is set again at line 11`, `line 13: key "logLevel" is set again at line 14`,
		"line 2: unknown field colour: ignored")
}

// Odd documents (nulls where maps are expected, aliases of receivers,
// merges of lists, empty documents) are parsed, and their first
// receiver's records encoded, without a panic.
func TestParseConfigOfOddDocumentsDoesNotPanic(t *testing.T) {
	for _, s := range []string{
		"receivers: [~]\n",
		"receivers:\n  - ~\n  - name: a\n    stdout: {}\n",
		"receivers:\n  - name: a\n    stdout: {layout: {a: [~, 1, {b: ~}], c: *x}}\n",
		"receivers:\n  - name: a\n    stdout: {}\nroute: {routes: [~, {match: [~]}, {drop: [~]}]}\n",
		"receivers:\n  - name: a\n    stdout: {}\nroute: {match: [{labels: ~, annotations: {}}]}\n",
		"receivers:\n  - name: a\n    stdout: {}\nroute: {match: [{labels: {a: ~}}]}\n",
		"receivers:\n  - name: a\n    stdout: {layout: ~}\n",
		"receivers:\n  - name: a\n    webhook: {endpoint: 'http://x', headers: ~, tls: ~}\n",
		"receivers:\n  - name: a\n    loki: {url: 'http://x', streamLabels: ~}\n",
		"receivers:\n  - name: a\n    elasticsearch: {hosts: [~], index: x}\n",
		"receivers:\n  - name: a\n    kafka: {brokers: [~], topic: t, tls: ~, sasl: ~}\n",
		"receivers:\n  - name: a\n    stdout: {}\n    retry: ~\n    queue: ~\n",
		"receivers:\n  - name: a\n    slack: {token: x, channel: c, fields: ~}\n",
		"receivers:\n  - &r {name: a, stdout: {}}\n  - *r\n",
		"receivers: {}\n",
		"route: []\nreceivers: []\n",
		"---\n",
		"[]\n",
		"receivers:\n  - name: a\n    stdout:\n      layout:\n        <<: [{a: x}, {b: y}]\n",
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q: panic %v", s, r)
				}
			}()
			c, err := ParseConfig("c.yaml", []byte(s))
			if err == nil && len(c.Receivers) > 0 {
				if _, err := c.Receivers[0].encoder("")(occ("a", 1, "ns")); err != nil {
					t.Logf("%q: encode %v", s, err)
				}
			}
			t.Logf("%q: %v", s, err)
		}()
	}
}

// A batch above fanout.MaxQueueLength is a configuration error naming its
// receiver. It was accepted: NewPipeline then sized a lossy sink's ring
// of recent Seqs by it (batch 2^40: out of memory, a fatal error), and
// the runner allocated a buffer of batch occurrences.
func TestParseConfigRefusesABatchAboveMaxQueueLength(t *testing.T) {
	for _, batch := range []string{"16777217", "1099511627776"} {
		_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: a\n    stdout: {}\n    batch: "+batch+"\n    queue: {strategy: DropOldest}\n"))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("batch %s: error %v, want a *ConfigError", batch, err)
		}
		if want := `receiver "a": batch ` + batch + ` must be 1 to 16777216`; !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\ndoes not contain %q", err, want)
		}
	}
	if _, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: a\n    stdout: {}\n    batch: 16777216\n")); err != nil {
		t.Errorf("batch 16777216 (MaxQueueLength): %v", err)
	}
}

// sinkKindFields returns the fields of Receiver that point to a sink
// kind's configuration, by their YAML names.
func sinkKindFields(t *testing.T) map[string]reflect.StructField {
	t.Helper()
	kinds := map[string]reflect.StructField{}
	for f := range reflect.TypeFor[Receiver]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && name != "" && name != "retry" {
			kinds[name] = f
		}
	}
	if len(kinds) < 24 {
		t.Fatalf("sink kinds %v: want at least kubernetes-event-exporter's 21 and nats, otlp, log", kinds)
	}
	return kinds
}

// receiverDoc returns the doc comment of the Receiver type, on one line.
func receiverDoc(t *testing.T) string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range file.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE && g.Specs[0].(*ast.TypeSpec).Name.Name == "Receiver" {
			return strings.Join(strings.Fields(g.Doc.Text()), " ")
		}
	}
	t.Fatal("no Receiver type in config.go")
	return ""
}

// Every sink kind is a sink (kinds), named in the error of a receiver
// without one and in Receiver's doc comment: the AWS kinds and the others
// merged last included.
func TestEveryReceiverKindIsNamedInTheDocAndTheMissingSinkError(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: r\n"))
	if err == nil {
		t.Fatal("a receiver without a sink is accepted")
	}
	doc := receiverDoc(t)
	for kind, f := range sinkKindFields(t) {
		r := &Receiver{}
		reflect.ValueOf(r).Elem().FieldByIndex(f.Index).Set(reflect.New(f.Type.Elem()))
		if ks := r.kinds(); len(ks) != 1 || ks[0].name != kind {
			t.Errorf("a receiver with %s has the kinds %v", kind, ks)
		}
		named := regexp.MustCompile(`\b` + kind + `\b`)
		if !named.MatchString(err.Error()) {
			t.Errorf("the error of a receiver without a sink does not name %s: %v", kind, err)
		}
		if !named.MatchString(doc) {
			t.Errorf("Receiver's doc comment does not name %s: %q", kind, doc)
		}
	}
}
