// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/exporter/engine.go and
// main.go), licensed under the Apache License, Version 2.0: see LICENSE in
// this directory.
// Changes: the package name; of engine.go, the Engine and its OnEvent
// only; of main.go, the lines that set the cluster name, as a function.

package kee

// Engine is responsible for initializing the receivers from sinks
type Engine struct {
	Route    Route
	Registry ReceiverRegistry
}

// OnEvent does not care whether event is add or update. Prior filtering should be done in the controller/watcher
func (e *Engine) OnEvent(event *EnhancedEvent) {
	e.Route.ProcessEvent(event, e.Registry)
}

// WithClusterName returns the handler main.go gives the watcher.
func WithClusterName(clusterName string, onEvent EventHandler) EventHandler {
	if len(clusterName) != 0 {
		next := onEvent
		onEvent = func(event *EnhancedEvent) {
			// note that per code this value is not set anywhere on the kubernetes side
			// https://github.com/kubernetes/apimachinery/blob/v0.22.4/pkg/apis/meta/v1/types.go#L276
			event.ClusterName = clusterName
			next(event)
		}
	}
	return onEvent
}
