// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/sinks/sink.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; only the Sink interface is kept.

package kee

import (
	"context"
)

// Sink is the interface that the third-party providers should implement. It should just get the event and
// transform it depending on its configuration and submit it. Error handling for retries etc. should be handled inside
// for now.
type Sink interface {
	Send(ctx context.Context, ev *EnhancedEvent) error
	Close()
}
