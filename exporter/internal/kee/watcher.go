// Copied from kubernetes-event-exporter v1.6.1
// (github.com/resmoio/kubernetes-event-exporter, pkg/kube/watcher.go), licensed under
// the Apache License, Version 2.0: see LICENSE in this directory.
// Changes: the package name; the watcher takes a clientset; no logging, metrics or
// object lookups (omitLookup: true); OnAdd takes client-go's newer isInInitialList;
// Start and Stop replaced by Run and HasSynced.

//lint:file-ignore ST1011 the code is kept as kubernetes-event-exporter has it

package kee

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

type EventHandler func(event *EnhancedEvent)

type EventWatcher struct {
	informer           cache.SharedInformer
	fn                 EventHandler
	maxEventAgeSeconds time.Duration
}

func NewEventWatcher(clientset kubernetes.Interface, namespace string, MaxEventAgeSeconds int64, fn EventHandler) *EventWatcher {
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Events().Informer()

	watcher := &EventWatcher{
		informer:           informer,
		fn:                 fn,
		maxEventAgeSeconds: time.Second * time.Duration(MaxEventAgeSeconds),
	}

	_, _ = informer.AddEventHandler(watcher)

	return watcher
}

func (e *EventWatcher) OnAdd(obj interface{}, _ bool) {
	event := obj.(*corev1.Event)
	e.onEvent(event)
}

func (e *EventWatcher) OnUpdate(oldObj, newObj interface{}) {
	// Ignore updates
}

// Ignore events older than the maxEventAgeSeconds
func (e *EventWatcher) isEventDiscarded(event *corev1.Event) bool {
	timestamp := event.LastTimestamp.Time
	if timestamp.IsZero() {
		timestamp = event.EventTime.Time
	}
	eventAge := time.Since(timestamp)
	return eventAge > e.maxEventAgeSeconds
}

func (e *EventWatcher) onEvent(event *corev1.Event) {
	if e.isEventDiscarded(event) {
		return
	}

	ev := &EnhancedEvent{
		Event: *event.DeepCopy(),
	}
	ev.Event.ManagedFields = nil

	ev.InvolvedObject.ObjectReference = *event.InvolvedObject.DeepCopy()

	e.fn(ev)
}

func (e *EventWatcher) OnDelete(obj interface{}) {
	// Ignore deletes
}

// Run runs the informer until stop is closed.
func (e *EventWatcher) Run(stop <-chan struct{}) {
	e.informer.Run(stop)
}

// HasSynced reports whether the informer has handled its first list.
func (e *EventWatcher) HasSynced() bool { return e.informer.HasSynced() }
