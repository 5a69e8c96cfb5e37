// Package otlptest tests the exporter's OTLP sink against the
// OpenTelemetry Collector's own OTLP receiver, run in the tests. It is a
// module of its own so that the Collector's dependencies stay out of the
// exporter's module; it has no code besides its tests.
package otlptest
