// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/exporter/sync_registry.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; kube.EnhancedEvent and sinks.Sink are this package's; no logging; SendEvent keeps
// the sinks' errors in Errors.

package kee

import (
	"context"
)

// SyncRegistry is for development purposes and performs poorly and blocks when an event is received so it is
// not suited for high volume & production workloads
type SyncRegistry struct {
	reg    map[string]Sink
	Errors []error
}

func (s *SyncRegistry) SendEvent(name string, event *EnhancedEvent) {
	err := s.reg[name].Send(context.Background(), event)
	if err != nil {
		s.Errors = append(s.Errors, err)
	}
}

func (s *SyncRegistry) Register(name string, sink Sink) {
	if s.reg == nil {
		s.reg = make(map[string]Sink)
	}

	s.reg[name] = sink
}

func (s *SyncRegistry) Close() {
	for _, sink := range s.reg {
		sink.Close()
	}
}
