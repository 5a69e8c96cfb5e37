package exporter_test

import (
	"context"
	"fmt"

	"github.com/fanout-go/fanout/exporter"
)

// printSink is a sink of one's own: Write and Close are all it takes.
type printSink struct{}

func (printSink) Write(_ context.Context, batch []*exporter.Occurrence) (int, error) {
	for _, o := range batch {
		fmt.Println(o.Key(), o.Reason)
	}
	return len(batch), nil
}

func (printSink) Close(context.Context) error { return nil }

// A pipeline with a sink of one's own, fed by hand as the source would:
// warnings go to the printing sink, kube-system is dropped.
func ExampleNewPipeline() {
	cfg, err := exporter.ParseConfig("example", []byte(`
route:
  drop:
    - namespace: "^kube-system$"
  match:
    - type: "^Warning$"
      receiver: print
receivers:
  - name: print
    log: {}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Receivers[0].Log, cfg.Receivers[0].Sink = nil, printSink{}
	p, err := exporter.NewPipeline(cfg, exporter.PipelineOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, o := range []*exporter.Occurrence{
		{UID: "a", Count: 1, Namespace: "shop", Type: "Warning", Reason: "BackOff"},
		{UID: "b", Count: 1, Namespace: "kube-system", Type: "Warning", Reason: "BackOff"},
		{UID: "c", Count: 1, Namespace: "shop", Type: "Normal", Reason: "Pulled"},
		{UID: "a", Count: 2, Namespace: "shop", Type: "Warning", Reason: "BackOff"},
	} {
		_ = p.Occurred(ctx, o)
	}
	_ = p.Shutdown(ctx) // flushes
	// Output:
	// a/1 BackOff
	// a/2 BackOff
}

// A configuration error names the file and the line of every problem;
// what loads but deserves a look (a deprecated key of
// kubernetes-event-exporter, a pattern that never matches) is a warning
// with its line.
func ExampleParseConfig() {
	_, err := exporter.ParseConfig("bad.yaml", []byte(`
route:
  match:
    - reason: BackOff
      receiver: alerts
receivers:
  - name: dump
    stdout: {}
    queue: {length: 0, strategy: Sometimes}
`))
	fmt.Println(err)
	c, _ := exporter.ParseConfig("theirs.yaml", []byte(`
throttlePeriod: 10
route:
  drop:
    - namespace: "*test*"
  match:
    - receiver: dump
receivers:
  - name: dump
    stdout: {}
`))
	for _, w := range c.Warnings {
		fmt.Println(w)
	}
	// Output:
	// invalid configuration bad.yaml:
	//   line 5: unknown receiver "alerts"
	//   line 7: receiver "dump": queue.strategy "Sometimes" is unknown (want Wait, DropOldest, DropNewest or WaitTimeout)
	// line 2: throttlePeriod is kubernetes-event-exporter's deprecated name of maxEventAgeSeconds: taken as maxEventAgeSeconds: 10
	// line 5: invalid regular expression "*test*" never matches (as in kubernetes-event-exporter): error parsing regexp: missing argument to repetition operator: `*`
}
