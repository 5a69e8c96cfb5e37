// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/elasticsearch.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent is this package's; no logging; the request is handed to Do, a function, instead of the go-elasticsearch client (the client, TLS and headers are left out); Send returns the error of Do.

package kee

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"time"
)

type ElasticsearchConfig struct {
	// Connection specific
	Hosts    []string          `yaml:"hosts"`
	Username string            `yaml:"username"`
	Password string            `yaml:"password"`
	CloudID  string            `yaml:"cloudID"`
	APIKey   string            `yaml:"apiKey"`
	Headers  map[string]string `yaml:"headers"` // Can be used to append additional key value pairs into the request headers
	// Indexing preferences
	UseEventID bool `yaml:"useEventID"`
	// DeDot all labels and annotations in the event. For both the event and the involvedObject
	DeDot       bool                   `yaml:"deDot"`
	Index       string                 `yaml:"index"`
	IndexFormat string                 `yaml:"indexFormat"`
	Type        string                 `yaml:"type"`
	Layout      map[string]interface{} `yaml:"layout"`
}

// IndexRequest is the request Send makes: esapi.IndexRequest's fields
// that Send sets.
type IndexRequest struct {
	Index        string
	DocumentType string
	DocumentID   string
	Body         io.Reader
}

func NewElasticsearch(cfg *ElasticsearchConfig, do func(context.Context, IndexRequest) error) (*Elasticsearch, error) {
	return &Elasticsearch{
		do:  do,
		cfg: cfg,
	}, nil
}

type Elasticsearch struct {
	do  func(context.Context, IndexRequest) error
	cfg *ElasticsearchConfig
}

var regex = regexp.MustCompile(`(?s){(.*)}`)

func formatIndexName(pattern string, when time.Time) string {
	m := regex.FindAllStringSubmatchIndex(pattern, -1)
	current := 0
	var builder strings.Builder

	for i := 0; i < len(m); i++ {
		pair := m[i]

		builder.WriteString(pattern[current:pair[0]])
		builder.WriteString(when.Format(pattern[pair[0]+1 : pair[1]-1]))
		current = pair[1]
	}

	builder.WriteString(pattern[current:])

	return builder.String()
}

func (e *Elasticsearch) Send(ctx context.Context, ev *EnhancedEvent) error {
	var toSend []byte

	if e.cfg.DeDot {
		de := ev.DeDot()
		ev = &de
	}
	if e.cfg.Layout != nil {
		res, err := convertLayoutTemplate(e.cfg.Layout, ev)
		if err != nil {
			return err
		}

		toSend, err = json.Marshal(res)
		if err != nil {
			return err
		}
	} else {
		toSend = ev.ToJSON()
	}

	var index string
	if len(e.cfg.IndexFormat) > 0 {
		now := time.Now()
		index = formatIndexName(e.cfg.IndexFormat, now)
	} else {
		index = e.cfg.Index
	}

	req := IndexRequest{
		Body:  bytes.NewBuffer(toSend),
		Index: index,
	}

	// This should not be used for clusters with ES8.0+.
	if len(e.cfg.Type) > 0 {
		req.DocumentType = e.cfg.Type
	}

	if e.cfg.UseEventID {
		req.DocumentID = string(ev.UID)
	}

	return e.do(ctx, req)
}

func (e *Elasticsearch) Close() {
	// No-op
}
