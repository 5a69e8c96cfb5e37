// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/stdout.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent is this package's; NewStdoutSink takes the writer (os.Stdout there).

package kee

import (
	"context"
	"encoding/json"
	"io"
	"log"
)

type StdoutConfig struct {
	// DeDot all labels and annotations in the event. For both the event and the involvedObject
	DeDot  bool                   `yaml:"deDot"`
	Layout map[string]interface{} `yaml:"layout"`
}

func (f *StdoutConfig) Validate() error {
	return nil
}

type Stdout struct {
	writer  io.Writer
	encoder *json.Encoder
	cfg     *StdoutConfig
}

func NewStdoutSink(config *StdoutConfig, stdout io.Writer) (*Stdout, error) {
	logger := log.New(stdout, "", 0)
	writer := logger.Writer()

	return &Stdout{
		writer:  writer,
		encoder: json.NewEncoder(writer),
		cfg:     config,
	}, nil
}

func (f *Stdout) Close() {
}

func (f *Stdout) Send(ctx context.Context, ev *EnhancedEvent) error {
	if f.cfg.DeDot {
		de := ev.DeDot()
		ev = &de
	}

	if f.cfg.Layout == nil {
		return f.encoder.Encode(ev)
	}

	res, err := convertLayoutTemplate(f.cfg.Layout, ev)
	if err != nil {
		return err
	}

	return f.encoder.Encode(res)
}
