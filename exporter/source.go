package exporter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Target is what a [Source] feeds: a [Pipeline].
type Target interface {
	Occurred(ctx context.Context, o *Occurrence) error
	Deleted(uid, resourceVersion string)
}

// Source watches Events with client-go's informer machinery (a reflector
// listing and watching into a DeltaFIFO, drained by one goroutine that
// calls the handler, with no unbounded notification buffer in between) and
// turns them into occurrences: an event seen for the first time, or whose
// count (or series count) rose above the last count forwarded, is one
// occurrence. Updates that do not raise the count, and deletions, are not
// occurrences; a deletion removes the event from the checkpoint.
type Source struct {
	client    kubernetes.Interface
	api       string
	namespace string
	target    Target

	mu        sync.Mutex       // serialises the handler and the pruning after sync
	forwarded map[string]int32 // last count forwarded, by UID
	ctx       context.Context  // set by Run

	synced                      atomic.Bool
	lists, watches, occurrences atomic.Uint64
	updatesIgnored, deletes     atomic.Uint64
	lagNanos                    atomic.Int64
	observeLag                  func(seconds float64)
	store                       cache.Store
	controller                  cache.Controller
}

// SourceStats is a snapshot of a [Source]'s counters.
type SourceStats struct {
	// Lists and Watches count the list and watch requests made; every
	// watch after the first is a restart.
	Lists, Watches uint64
	// Occurrences counts occurrences forwarded; UpdatesIgnored the
	// modifications that did not raise the count; Deletes the deletions.
	Occurrences, UpdatesIgnored, Deletes uint64
	// Lag is how late the last occurrence was forwarded, after its
	// last timestamp.
	Lag time.Duration
	// Synced is true once the initial list has been handled.
	Synced bool
}

// NewSource returns a source of the events of api ([CoreV1] or [EventsV1])
// in namespace (empty for all) that feeds target. ck, if not nil, holds the
// counts already forwarded before a restart. observeLag, if not nil, is
// called with the lag of every occurrence, in seconds.
func NewSource(client kubernetes.Interface, api, namespace string, target Target, ck *Checkpoint, observeLag func(float64)) (*Source, error) {
	s := &Source{client: client, api: api, namespace: namespace, target: target,
		forwarded: map[string]int32{}, observeLag: observeLag}
	if ck != nil {
		for uid, n := range ck.Counts {
			s.forwarded[uid] = n
		}
	}
	lw, obj, err := s.listWatch()
	if err != nil {
		return nil, err
	}
	s.store, s.controller = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: obj, Handler: s, Transform: stripManagedFields,
	})
	return s, nil
}

// listWatch returns the list-watch of the API, counting lists and watches.
func (s *Source) listWatch() (cache.ListerWatcher, runtime.Object, error) {
	var list func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	var watchF func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	var obj runtime.Object
	switch s.api {
	case CoreV1:
		c := s.client.CoreV1().Events(s.namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchF, obj = c.Watch, &corev1.Event{}
	case EventsV1:
		c := s.client.EventsV1().Events(s.namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchF, obj = c.Watch, &eventsv1.Event{}
	default:
		return nil, nil, fmt.Errorf("source: unknown API %q", s.api)
	}
	// The fake clientset does not support watch-list semantics; this
	// tells the reflector so (a real client does).
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			s.lists.Add(1)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			s.watches.Add(1)
			return watchF(ctx, o)
		},
	}, s.client), obj, nil
}

// stripManagedFields keeps the informer's cache smaller.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run runs the informer until ctx ends. Once the initial list is handled,
// it removes from its state (and the checkpoint) the events that were
// deleted while the exporter was down, and reports itself synced.
func (s *Source) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.controller.RunWithContext(ctx)
	}()
	if cache.WaitForCacheSync(ctx.Done(), s.controller.HasSynced) {
		s.pruneGone()
		s.synced.Store(true)
	}
	<-done
}

// pruneGone forgets the events forwarded before that no longer exist.
func (s *Source) pruneGone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := map[string]bool{}
	for _, obj := range s.store.List() {
		if m, err := meta.Accessor(obj); err == nil {
			live[string(m.GetUID())] = true
		}
	}
	for uid := range s.forwarded {
		if !live[uid] {
			delete(s.forwarded, uid)
			s.target.Deleted(uid, "")
		}
	}
}

// Synced reports whether the initial list has been handled.
func (s *Source) Synced() bool { return s.synced.Load() }

// OnAdd handles an event seen for the first time (or again after a relist).
func (s *Source) OnAdd(obj any, _ bool) { s.handle(obj) }

// OnUpdate handles a modification: an occurrence if it raised the count.
func (s *Source) OnUpdate(_, obj any) { s.handle(obj) }

// OnDelete forgets the event.
func (s *Source) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes.Add(1)
	if _, ok := s.forwarded[string(m.GetUID())]; ok {
		delete(s.forwarded, string(m.GetUID()))
		s.target.Deleted(string(m.GetUID()), m.GetResourceVersion())
	}
}

func (s *Source) handle(obj any) {
	var o *Occurrence
	switch e := obj.(type) {
	case *corev1.Event:
		o = FromCore(e)
	case *eventsv1.Event:
		o = FromEvents(e)
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.forwarded[o.UID]; ok && o.Count <= prev {
		s.updatesIgnored.Add(1)
		return
	}
	if err := s.target.Occurred(s.ctx, o); err != nil {
		return // shutting down: not forwarded, not recorded
	}
	s.forwarded[o.UID] = o.Count
	s.occurrences.Add(1)
	if !o.LastTime.IsZero() {
		lag := time.Since(o.LastTime)
		s.lagNanos.Store(int64(lag))
		if s.observeLag != nil {
			s.observeLag(lag.Seconds())
		}
	}
}

// Stats returns the source's counters.
func (s *Source) Stats() SourceStats {
	return SourceStats{Lists: s.lists.Load(), Watches: s.watches.Load(), Occurrences: s.occurrences.Load(),
		UpdatesIgnored: s.updatesIgnored.Load(), Deletes: s.deletes.Load(),
		Lag: time.Duration(s.lagNanos.Load()), Synced: s.synced.Load()}
}
