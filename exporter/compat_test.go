package exporter

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// parseOK parses a configuration that must load, and returns it.
func parseOK(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := ParseConfig("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantWarnings checks that every want is a substring of one warning.
func wantWarnings(t *testing.T, c *Config, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(c.Warnings, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no warning contains %q; warnings:\n%s", w, strings.Join(c.Warnings, "\n"))
		}
	}
}

func TestMaxEventAgeSecondsAndThrottlePeriodBothSetAreRefusedAsTheirsRefusesThem(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte(`logLevel: info
maxEventAgeSeconds: 5
throttlePeriod: 5
receivers: [{name: a, stdout: {}}]
route: {match: [{receiver: a}]}
`))
	if err == nil || !strings.Contains(err.Error(), "line 3: throttlePeriod (deprecated) and maxEventAgeSeconds are both set") {
		t.Errorf("err %v, want both keys refused at line 3", err)
	}
}

func TestThrottlePeriodIsTheDeprecatedNameOfMaxEventAgeSeconds(t *testing.T) {
	c := parseOK(t, "throttlePeriod: 30\nreceivers: [{name: a, stdout: {}}]\nroute: {match: [{receiver: a}]}\n")
	if c.MaxEventAge() != 30*time.Second {
		t.Errorf("MaxEventAge %v, want throttlePeriod's 30s", c.MaxEventAge())
	}
	wantWarnings(t, c, "line 1: throttlePeriod is kubernetes-event-exporter's deprecated name of maxEventAgeSeconds")
	for _, w := range c.Warnings {
		if strings.Contains(w, "ignored") {
			t.Errorf("warning %q: throttlePeriod takes effect", w)
		}
	}
}

func TestMaxEventAgeDefaultsToTheirsOnlyWithoutACheckpoint(t *testing.T) {
	const rest = "receivers: [{name: a, stdout: {}}]\nroute: {match: [{receiver: a}]}\n"
	for body, want := range map[string]time.Duration{
		"":                                   KEEDefaultMaxEventAge,
		"maxEventAgeSeconds: 600\n":          10 * time.Minute,
		"checkpoint: {file: /tmp/ck.json}\n": 0,
		"checkpoint: {file: /tmp/ck.json}\nmaxEventAgeSeconds: 60\n": time.Minute,
	} {
		if got := parseOK(t, body+rest).MaxEventAge(); got != want {
			t.Errorf("%q: MaxEventAge %v, want %v", body, got, want)
		}
	}
	if got := testConfig(t, &memSink{}).MaxEventAge(); got != 0 {
		t.Errorf("a Config made by a program: MaxEventAge %v, want none", got)
	}
}

func TestNegativeAgeQPSAndBurstAreRefusedWithTheirLines(t *testing.T) {
	_, err := ParseConfig("c.yaml", []byte(`maxEventAgeSeconds: -1
kubeQPS: -5
kubeBurst: -10
receivers: [{name: a, stdout: {}}]
route: {match: [{receiver: a}]}
`))
	for _, want := range []string{"line 1: maxEventAgeSeconds: -1 is negative", "line 2: kubeQPS: -5 is negative",
		"line 3: kubeBurst: -10 is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want %q", err, want)
		}
	}
}

func TestMetricsNamePrefixIsCheckedAsTheirsChecksIt(t *testing.T) {
	c := parseOK(t, "metricsNamePrefix: event_exporter_\nreceivers: [{name: a, stdout: {}}]\nroute: {match: [{receiver: a}]}\n")
	if p, ok := c.metricsPrefix(); !ok || p != "event_exporter_" || len(c.Warnings) != 0 {
		t.Errorf("prefix %q, set %v, warnings %q: want event_exporter_, no warning", p, ok, c.Warnings)
	}
	_, err := ParseConfig("c.yaml", []byte("metricsNamePrefix: 1bad\nreceivers: [{name: a, stdout: {}}]\n"))
	if err == nil || !strings.Contains(err.Error(), `line 1: metricsNamePrefix "1bad" must match`) {
		t.Errorf("err %v, want the prefix refused", err)
	}
}

func TestOmitLookupAndCacheSizeTakeEffectWithoutAWarning(t *testing.T) {
	for _, omit := range []string{"true", "false"} {
		c := parseOK(t, "omitLookup: "+omit+"\ncacheSize: 4096\nreceivers: [{name: a, stdout: {}}]\nroute: {match: [{receiver: a}]}\n")
		if len(c.Warnings) != 0 || c.OmitLookup != (omit == "true") || c.CacheSize != 4096 {
			t.Errorf("warnings %q, omitLookup %v, cacheSize %d", c.Warnings, c.OmitLookup, c.CacheSize)
		}
	}
}

func TestNegativeCacheSizeIsAConfigurationError(t *testing.T) {
	_, err := ParseConfig("c", []byte("cacheSize: -1\nreceivers: [{name: a, stdout: {}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "cacheSize: -1 is negative") {
		t.Errorf("err %v, want cacheSize: -1 is negative", err)
	}
}

func TestReceiverWithSeveralSinksUsesTheFirstInTheirOrder(t *testing.T) {
	c := parseOK(t, "receivers:\n  - name: x\n    stdout: {}\n    file: {path: /tmp/x}\n")
	wantWarnings(t, c, `line 2: receiver "x" sets several sinks: file is used, as kubernetes-event-exporter does; ignored: stdout`)
	if r := c.Receivers[0]; r.File == nil || r.Stdout != nil {
		t.Errorf("file %v, stdout %v; want the file sink only", r.File, r.Stdout)
	}
}

func TestInvalidPatternNeverMatchesAsInTheirsWithAWarning(t *testing.T) {
	c := parseOK(t, `route:
  drop:
    - namespace: "*test*"
  match:
    - receiver: a
receivers: [{name: a, stdout: {}}]
`)
	wantWarnings(t, c, `line 3: invalid regular expression "*test*" never matches`)
	if set, dropped := c.Route.receivers(occ("u", 1, "a-test-ns")); set != 1 || dropped {
		t.Errorf("routed to %b, dropped %v; the drop rule must not match", set, dropped)
	}
}

func TestLabelsAndAnnotationsRulesNeverMatchWithOmitLookupAndAWarning(t *testing.T) {
	c := parseOK(t, `route:
  drop:
    - annotations: {team: x}
  match:
    - kind: Pod
      labels: {version: dev}
      receiver: a
    - receiver: b
receivers: [{name: a, stdout: {}}, {name: b, stdout: {}}]
omitLookup: true
`)
	wantWarnings(t, c, "line 3: annotations: involved objects are not looked up (omitLookup: true)",
		"line 6: labels: involved objects are not looked up (omitLookup: true)")
	if set, _ := c.Route.receivers(occ("u", 1, "ns")); set != 2 {
		t.Errorf("routed to %b, want b only (10)", set)
	}
}

func TestLoadConfigExpandsEnvironmentVariablesAsTheirsDoes(t *testing.T) {
	t.Setenv("FANOUT_TEST_ENDPOINT", "http://hooks.example:8080/in")
	t.Setenv("FANOUT_TEST_CLUSTER", "prod-eu")
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `clusterName: ${FANOUT_TEST_CLUSTER}
route:
  drop:
    - namespace: "^kube-system$"
receivers:
  - name: w
    webhook: {endpoint: "$FANOUT_TEST_ENDPOINT"}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterName != "prod-eu" || c.Receivers[0].Webhook.Endpoint != "http://hooks.example:8080/in" {
		t.Errorf("clusterName %q, endpoint %q", c.ClusterName, c.Receivers[0].Webhook.Endpoint)
	}
	if got := c.Route.Drop[0].Namespace.String(); got != "^kube-system$" {
		t.Errorf("a $ not followed by a name changed: %q", got)
	}
}

func TestLeaderElectionFromTheConfigurationEnablesTheLease(t *testing.T) {
	dir := t.TempDir()
	old := serviceAccountNamespace
	serviceAccountNamespace = filepath.Join(dir, "namespace")
	t.Cleanup(func() { serviceAccountNamespace = old })
	if err := os.WriteFile(serviceAccountNamespace, []byte("monitoring\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", "")
	fl, err := parseFlags([]string{"--config", "c.yaml"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.applyLeaderElection(LeaderElectionConfig{Enabled: true, LeaderElectionID: "kubernetes-event-exporter"}); err != nil {
		t.Fatal(err)
	}
	if !fl.leaderElect || fl.leaseName != "kubernetes-event-exporter" || fl.leaseNamespace != "monitoring" {
		t.Errorf("leader election %v, lease %s/%s", fl.leaderElect, fl.leaseNamespace, fl.leaseName)
	}
	fl, _ = parseFlags([]string{"--config", "c.yaml", "--leader-elect-name", "mine"}, &strings.Builder{})
	_ = fl.applyLeaderElection(LeaderElectionConfig{Enabled: true, LeaderElectionID: "theirs"})
	if fl.leaseName != "mine" {
		t.Errorf("lease name %q, want the flag's", fl.leaseName)
	}
}

func TestLeaderElectionDisabledChangesNothing(t *testing.T) {
	fl, _ := parseFlags([]string{"--config", "c.yaml"}, &strings.Builder{})
	if err := fl.applyLeaderElection(LeaderElectionConfig{LeaderElectionID: "x"}); err != nil || fl.leaderElect {
		t.Errorf("err %v, leader election %v", err, fl.leaderElect)
	}
}

func TestPipeSinkWritesJSONLinesToItsPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe")
	c := parseOK(t, "receivers:\n  - name: p\n    pipe: {path: "+path+"}\n")
	s, err := c.Receivers[0].build("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(t.Context(), []*Occurrence{occ("u", 1, "ns")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "\n") || !strings.Contains(string(b), `"uid":"u"`) {
		t.Errorf("pipe got %q", b)
	}
}

func TestUnknownKeysAreIgnoredWithAWarningAsTheirsIgnoresThem(t *testing.T) {
	c := parseOK(t, "receivers:\n  - name: a\n    stdout: {}\n    colour: red\n")
	wantWarnings(t, c, "line 4: unknown field colour: ignored")
}

func TestTheirLogLevelsAndFormatsMapToOurs(t *testing.T) {
	for in, want := range map[string]string{"trace": "debug", "fatal": "error", "panic": "error", "warn": "warn"} {
		c := parseOK(t, "logLevel: "+in+"\nlogFormat: pretty\nreceivers: [{name: a, stdout: {}}]\n")
		if c.LogLevel != want || c.LogFormat != "text" {
			t.Errorf("logLevel %s: got %s, format %s", in, c.LogLevel, c.LogFormat)
		}
	}
}

// kubernetes-event-exporter (zerolog v1.28's ParseLevel) accepts logLevel
// disabled and zerolog's numbers, -128 to 127; they map to the nearest
// level, and disabled logs nothing.
func TestTheirLogLevelsDisabledAndNumericMapToTheNearest(t *testing.T) {
	for in, want := range map[string]string{"disabled": "disabled", "-1": "debug", "-128": "debug", "0": "debug",
		"1": "info", "2": "warn", "3": "error", "5": "error", "6": "disabled", "127": "disabled"} {
		c := parseOK(t, "logLevel: \""+in+"\"\nreceivers: [{name: a, stdout: {}}]\n")
		if c.LogLevel != want {
			t.Errorf("logLevel %s: got %s, want %s", in, c.LogLevel, want)
		}
	}
	wantConfigErrors(t, map[string]string{"stdout: {}\nlogLevel: \"128\"": `logLevel: unknown level "128"`})
	var buf bytes.Buffer
	newLogger(&Config{LogLevel: "disabled"}, &buf).Error("not logged")
	if buf.Len() > 0 {
		t.Errorf("logLevel disabled logged %q", buf.String())
	}
}

// kubernetes-event-exporter's rules have a receiver whatever their list,
// and its engine ignores a drop rule's: such a configuration loads, the
// receiver ignored with a warning, and the rule still drops.
func TestDropRuleReceiverIsIgnoredWithAWarningAsTheirs(t *testing.T) {
	c := parseOK(t, `
receivers:
  - name: dump
    stdout: {}
route:
  routes:
    - drop:
        - namespace: "^kube-system$"
          receiver: dump
      match:
        - receiver: dump
`)
	wantWarnings(t, c, `line 9: receiver "dump" of a drop rule: ignored`)
	if set, dropped := c.Route.receivers(occ("a", 1, "kube-system")); set != 0 || !dropped {
		t.Errorf("kube-system: receivers %b, dropped %v; want dropped", set, dropped)
	}
	if set, _ := c.Route.receivers(occ("b", 1, "default")); set != 1 {
		t.Errorf("default: receivers %b, want dump", set)
	}
}

// A configuration of theirs naming each of their receivers that this
// exporter gained last loads with every receiver kept and no warning.
func TestTheirSyslogOpsgeniePubsubBigQueryAvroAndInMemoryReceiversLoadWithoutWarnings(t *testing.T) {
	c := parseOK(t, `route: {routes: [{match: [{receiver: syslog}, {receiver: alert}, {receiver: pubsub}, {receiver: bq}, {receiver: kafka}, {receiver: mem}]}]}
receivers:
  - name: syslog
    syslog: {network: tcp, address: "127.0.0.1:11514", tag: k8s.event}
  - name: alert
    opsgenie: {apiKey: k, priority: P3, message: "{{ .Reason }}", alias: "{{ .UID }}", tags: [event], details: {a: b}}
  - name: pubsub
    pubsub: {gcloud_project_id: my-project, topic: kube-event, create_topic: False}
  - name: bq
    bigquery: {location: EU, project: p, dataset: d, table: t, credentials_path: /k.json, batch_size: 10,
      max_retries: 2, interval_seconds: 5, timeout_seconds: 30}
  - name: kafka
    kafka: {topic: kube-event, brokers: ["localhost:9092"], avro: {schemaID: 0123456789abcdef0123456789abcdef, schema: '"string"'}}
  - name: mem
    inMemory: {}
`)
	if len(c.Receivers) != 6 || len(c.Warnings) != 0 {
		t.Errorf("%d receivers, warnings %q; want 6 and none", len(c.Receivers), c.Warnings)
	}
}
