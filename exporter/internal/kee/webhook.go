// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/webhook.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent is this package's; no logging; TLS setup (setupTLS) left out: no TLS.

package kee

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

type WebhookConfig struct {
	Endpoint string                 `yaml:"endpoint"`
	Layout   map[string]interface{} `yaml:"layout"`
	Headers  map[string]string      `yaml:"headers"`
}

func NewWebhook(cfg *WebhookConfig) (Sink, error) {
	return &Webhook{cfg: cfg, transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
	}}, nil
}

type Webhook struct {
	cfg       *WebhookConfig
	transport *http.Transport
}

func (w *Webhook) Close() {
	w.transport.CloseIdleConnections()
}

func (w *Webhook) Send(ctx context.Context, ev *EnhancedEvent) error {
	reqBody, err := serializeEventWithLayout(w.cfg.Layout, ev)
	if err != nil {
		return err
	}

	req, err := http.NewRequest(http.MethodPost, w.cfg.Endpoint, bytes.NewReader(reqBody))
	if err != nil {
		return err
	}
	req.Header.Add("Content-Type", "application/json")

	for k, v := range w.cfg.Headers {
		realValue, err := GetString(ev, v)
		if err != nil {
			req.Header.Add(k, v)
		} else {
			req.Header.Add(k, realValue)
		}
	}

	client := http.DefaultClient
	client.Transport = w.transport
	resp, err := client.Do(req)
	if err != nil {
		return err
	}

	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}

	if !(resp.StatusCode >= 200 && resp.StatusCode < 300) {
		return errors.New("not successfull (2xx) response: " + string(body))
	}

	return nil
}
