package exporter

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readme returns README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The configurations the README shows load, without a warning.
func TestREADMEConfigurationsLoadWithoutWarnings(t *testing.T) {
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(readme(t), -1)
	if len(blocks) < 2 {
		t.Fatalf("%d YAML blocks in README.md, want the configuration and compat examples", len(blocks))
	}
	for _, b := range blocks {
		c, err := ParseConfig("README.md", []byte(b[1]))
		if err != nil {
			t.Errorf("%v\n%s", err, b[1])
			continue
		}
		if len(c.Warnings) > 0 {
			t.Errorf("warnings %q\n%s", c.Warnings, b[1])
		}
	}
}

// Every sink kind has a row in the README's table of receivers, and every
// kind of kubernetes-event-exporter's one in the migration guide's.
func TestREADMEHasARowForEveryReceiverKind(t *testing.T) {
	text := readme(t)
	config, migration, ok := strings.Cut(text, "## Migrating from kubernetes-event-exporter")
	if !ok {
		t.Fatal("README.md has no migration guide")
	}
	for kind := range sinkKindFields(t) {
		row := regexp.MustCompile("(?m)^\\| [^|]*`" + kind + "`")
		if !row.MatchString(config) {
			t.Errorf("no row of the receivers table names %s", kind)
		}
		if kind != "nats" && kind != "otlp" && kind != "log" && !row.MatchString(migration) {
			t.Errorf("no row of the migration guide names their receiver %s", kind)
		}
	}
}
