// Package kee is a copy of the code of kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, Apache-2.0, see LICENSE)
// that makes its records, renders its templates and routes its events:
// its EnhancedEvent, its event watcher's handlers, its route and rule
// engine, its synchronous receiver registry and the Send methods of its
// stdout, webhook, loki, elasticsearch and slack sinks. Each file names
// the file it was copied from and what was changed.
//
// It is test data: fanout-eventer's tests replay the same events through
// it and through fanout-eventer with compat: kubernetes-event-exporter,
// and check that both write the same records. Nothing else imports it.
package kee
