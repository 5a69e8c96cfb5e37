// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/loki.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent is this package's; no logging; TLS setup (setupTLS) left out: no TLS.

//lint:file-ignore SA1019 the code is kept as kubernetes-event-exporter has it

package kee

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/ioutil"
	"net/http"
	"strconv"
	"time"
)

type promtailStream struct {
	Stream map[string]string `json:"stream"`
	Values [][]string        `json:"values"`
}

type LokiMsg struct {
	Streams []promtailStream `json:"streams"`
}

type LokiConfig struct {
	Layout       map[string]interface{} `yaml:"layout"`
	StreamLabels map[string]string      `yaml:"streamLabels"`
	URL          string                 `yaml:"url"`
	Headers      map[string]string      `yaml:"headers"`
}

type Loki struct {
	cfg       *LokiConfig
	transport *http.Transport
}

func NewLoki(cfg *LokiConfig) (Sink, error) {
	return &Loki{cfg: cfg, transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
	}}, nil
}

func generateTimestamp() string {
	return strconv.FormatInt(time.Now().Unix(), 10) + "000000000"
}

func (l *Loki) Send(ctx context.Context, ev *EnhancedEvent) error {
	eventBody, err := serializeEventWithLayout(l.cfg.Layout, ev)
	if err != nil {
		return err
	}
	timestamp := generateTimestamp()
	a := LokiMsg{
		Streams: []promtailStream{{
			Stream: l.cfg.StreamLabels,
			Values: [][]string{{timestamp, string(eventBody)}},
		}},
	}
	reqBody, err := json.Marshal(a)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, l.cfg.URL, bytes.NewBuffer(reqBody))
	if err != nil {
		return err
	}

	req.Header.Set("Content-Type", "application/json")

	for k, v := range l.cfg.Headers {
		realValue, err := GetString(ev, v)
		if err != nil {
			req.Header.Add(k, v)
		} else {
			req.Header.Add(k, realValue)
		}
	}

	client := http.DefaultClient
	resp, err := client.Do(req)
	if err != nil {
		return err
	}

	defer resp.Body.Close()

	body, err := ioutil.ReadAll(resp.Body)
	if err != nil {
		return err
	}

	if !(resp.StatusCode >= 200 && resp.StatusCode < 300) {
		return errors.New("not successfull (2xx) response: " + string(body))
	}

	return nil
}

func (l *Loki) Close() {
	l.transport.CloseIdleConnections()
}
