package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// Target is what a [Source] feeds: a [Pipeline]. The source calls it from
// one goroutine, in the order of the changes it reads.
type Target interface {
	// Occurred forwards an occurrence.
	Occurred(ctx context.Context, o *Occurrence) error
	// Deleted records that an event forwarded before was deleted.
	Deleted(uid, resourceVersion string)
	// Progress records that every change up to resourceVersion has been
	// handed over: a watch resumed from it misses nothing.
	Progress(resourceVersion string)
}

// Source lists and watches Events and turns them into occurrences: an event
// seen for the first time, or whose count (or series count) rose above the
// last count forwarded, is one occurrence. Updates that do not raise the
// count, and deletions, are not occurrences; a deletion removes the event
// from the checkpoint.
//
// With a checkpoint that has a resource version, the source does not list:
// it watches from that resource version, so that every change made while
// the exporter was down comes, in order, and no count raise collapses into
// the last one. It lists only without one, or when the API server answers
// that the resource version is too old (410 Gone, after the watch cache and
// etcd's compaction moved past it); a list shows each event's current count
// only, so it counts the raises that may have collapsed (metric
// fanout_eventer_source_collapsed_raises_total) and logs them. The source
// keeps no copy of the events: one count per live event.
type Source struct {
	client    kubernetes.Interface
	api       string
	namespace string
	target    Target
	list      func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	watch     func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	log       *slog.Logger

	forwarded map[string]int32 // last count forwarded, by UID; owned by Run
	resumeRV  string           // the checkpoint's resource version
	baseline  bool             // forwarded holds what was forwarded before: a list may collapse raises
	ctx       context.Context  // set by Run
	maxAge    time.Duration    // the age cut-off of the first list (0: none)
	cutFirst  bool             // the first list is cut off by age (no complete list checkpointed yet)

	synced                      atomic.Bool
	lists, watches, occurrences atomic.Uint64
	relists, collapsed          atomic.Uint64
	updatesIgnored, deletes     atomic.Uint64
	tooOld, failures            atomic.Uint64
	lagNanos                    atomic.Int64
	observeLag                  func(seconds float64)
}

// SourceStats is a snapshot of a [Source]'s counters.
type SourceStats struct {
	// Lists and Watches count the lists of events and the watches made;
	// every watch after the first is a restart. The list of at most one
	// event that asks, before a watch resumes, whether the API server has
	// reached its resource version is not counted.
	Lists, Watches uint64
	// Relists counts the lists made where a watch could not resume
	// (a checkpoint without a resource version, or one the API server
	// no longer had, or had not reached: an etcd restored from a
	// backup); Collapsed the count raises those lists showed
	// folded into one occurrence (an event whose count rose by more than
	// one since the last count forwarded).
	Relists, Collapsed uint64
	// Occurrences counts occurrences forwarded; UpdatesIgnored the
	// modifications that did not raise the count; Deletes the deletions.
	Occurrences, UpdatesIgnored, Deletes uint64
	// Failures counts the lists and watches that failed and were
	// retried.
	Failures uint64
	// TooOld counts the events the first list without a checkpoint (or
	// with one without a resource version, which did not count them)
	// showed and did not forward: last seen longer than the age cut-off
	// before the start (see [Source.SetMaxAge]).
	TooOld uint64
	// Lag is how late the last occurrence was forwarded, after its
	// last timestamp.
	Lag time.Duration
	// Synced is true once the source has listed, or resumed its watch.
	Synced bool
}

// NewSource returns a source of the events of api ([CoreV1] or [EventsV1])
// in namespace (empty for all) that feeds target. ck, if not nil, holds the
// counts already forwarded before a restart, and the resource version to
// resume the watch from. observeLag, if not nil, is called with the lag of
// every occurrence, in seconds.
func NewSource(client kubernetes.Interface, api, namespace string, target Target, ck *Checkpoint, observeLag func(float64)) (*Source, error) {
	s := &Source{client: client, api: api, namespace: namespace, target: target,
		forwarded: map[string]int32{}, observeLag: observeLag, log: slog.New(slog.DiscardHandler)}
	s.cutFirst = ck == nil || ck.ResourceVersion == "" || ck.ResourceVersion == "0"
	if ck != nil {
		for uid, n := range ck.Counts {
			s.forwarded[uid] = n
		}
		s.baseline = true
		if ck.ResourceVersion != "0" {
			s.resumeRV = ck.ResourceVersion
		}
	}
	switch api {
	case CoreV1:
		c := client.CoreV1().Events(namespace)
		s.list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		s.watch = c.Watch
	case EventsV1:
		c := client.EventsV1().Events(namespace)
		s.list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		s.watch = c.Watch
	default:
		return nil, fmt.Errorf("source: unknown API %q", api)
	}
	return s, nil
}

// SetLogger makes the source log its lists, resumptions, lost watches and
// retries to l. Call it before Run.
func (s *Source) SetLogger(l *slog.Logger) {
	if l != nil {
		s.log = l
	}
}

// SetMaxAge sets kubernetes-event-exporter's age cut-off at start
// (maxEventAgeSeconds): when the source starts without a checkpoint, the
// events of its first list last seen (their last timestamp, series time
// or event time, else first timestamp: [Occurrence].LastTime) longer
// than d before the list are not forwarded, only
// counted ([SourceStats].TooOld) and recorded at their count, so that a
// later count raise is an occurrence; events without any timestamp are
// forwarded. A checkpoint without a resource version (written before the
// sinks were done with its first list: a first start stopped early)
// resumes the events it counts, and the cut-off applies to the others,
// which that first start had not reached. With a checkpoint that has a
// resource version, or d 0, nothing is cut off: the checkpoint decides.
// Call it before Run.
func (s *Source) SetMaxAge(d time.Duration) { s.maxAge = d }

// skipTarget is a [Target] that records the events the source does not
// forward because of the age cut-off, so that its checkpoint counts them
// as handled (a list after a restart would forward them otherwise).
type skipTarget interface {
	skipped(uid string, count int32)
}

// Retry delays after a failed list or watch: from minRetry, doubling up to
// maxRetry; a watch that ran for at least minRetry resets it.
const (
	minRetry = 250 * time.Millisecond
	maxRetry = 30 * time.Second
)

// errWatchClosed is a watch that ended without an error: the API server
// closed it (its timeout) or the connection was lost.
var errWatchClosed = errors.New("watch closed")

// Run lists or resumes, then watches until ctx ends, watching again from
// the last resource version seen when a watch ends, and listing again when
// that resource version is too old, or has been too large for the API
// server for tooLargeFor in a row.
func (s *Source) Run(ctx context.Context) {
	s.ctx = ctx
	st := runState{rv: s.resumeRV, delay: minRetry}
	if st.rv != "" {
		s.log.Info("resuming the watch of events from the checkpoint", "resourceVersion", st.rv)
	}
	for ctx.Err() == nil {
		listed := st.rv == ""
		if listed {
			rv, err := s.relist(ctx)
			if err != nil {
				st.delay = s.retryAfter(ctx, st.delay, "listing events failed", err)
				continue
			}
			st.rv = rv
		}
		start := time.Now()
		next, err := s.resume(ctx, st.rv, listed)
		if ctx.Err() != nil {
			return
		}
		s.afterWatch(ctx, &st, start, next, err)
	}
}

// runState is what Run carries from one watch to the next.
type runState struct {
	rv       string        // where the next watch starts; "" for a list first
	delay    time.Duration // the next retry delay
	tooLarge time.Time     // when rv was first answered "too large", in a row
}

// afterWatch sets where the next watch starts, from how the one from st.rv
// started at start ended: err, with next the last resource version seen.
// It waits before a retry.
func (s *Source) afterWatch(ctx context.Context, st *runState, start time.Time, next string, err error) {
	ran := time.Since(start) >= minRetry
	if ran {
		st.delay = minRetry
	}
	if !isTooLarge(err) {
		st.tooLarge = time.Time{}
	} else if st.tooLarge.IsZero() {
		st.tooLarge = start
	}
	switch {
	case isTooOld(err):
		s.log.Warn("the API server no longer has the changes after the last resource version: listing events; "+
			"count raises made meanwhile may collapse into one occurrence", "resourceVersion", st.rv, "err", err)
		st.rv = ""
	case isTooLarge(err) && time.Since(st.tooLarge) >= tooLargeFor:
		s.log.Warn("the API server has not reached the last resource version for "+tooLargeFor.String()+
			" (its etcd restored from a backup?): listing events; count raises made meanwhile may collapse "+
			"into one occurrence", "resourceVersion", st.rv, "err", err)
		st.rv, st.tooLarge = "", time.Time{}
	case errors.Is(err, errWatchClosed) && ran:
		s.log.Info("watch of events ended: watching again", "resourceVersion", next)
		st.rv = next
	default:
		st.rv = next
		st.delay = s.retryAfter(ctx, st.delay, "watching events failed", err)
	}
}

// isTooOld reports whether err says that a resource version is too old
// to watch from.
func isTooOld(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// resume watches from rv, and unless rv comes from a list just made
// (listed), first asks the API server whether it has reached rv: a list
// of at most one event not older than rv. A kube-apiserver answers such a
// list "Too large resource version" at once where its etcd has not reached
// rv, but starts a watch from rv and sends nothing, changes after it
// included, until it does: an etcd restored from a backup would have
// silenced the source for as long as the restored revisions took to pass
// the checkpoint's (days, perhaps), with no error to show for it.
func (s *Source) resume(ctx context.Context, rv string, listed bool) (string, error) {
	if !listed {
		o := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 1}
		if _, err := s.list(ctx, o); err != nil {
			return rv, err
		}
	}
	return s.watchFrom(ctx, rv)
}

// tooLargeFor is how long the API server must answer "Too large resource
// version" in a row before the source lists. An API server whose watch
// cache lags behind etcd (a restart) may give that answer for a moment,
// and retrying then loses nothing, where a list folds the count raises
// made meanwhile into one occurrence. One whose etcd was restored from a
// backup gives it until the restored revisions pass the source's, which
// may take days: only a list gets the source going again.
const tooLargeFor = 30 * time.Second

// isTooLarge reports whether err says that the API server has not reached
// the resource version a watch asked for.
func isTooLarge(err error) bool {
	return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// retryAfter logs a failure, waits delay (or until ctx ends) and returns
// the next delay.
func (s *Source) retryAfter(ctx context.Context, delay time.Duration, msg string, err error) time.Duration {
	s.failures.Add(1)
	s.log.Warn(msg+": retrying", "err", err, "retryIn", delay.String())
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return min(2*delay, maxRetry)
}

// relist lists the events, forwards what they show that was not forwarded,
// forgets the events forwarded before that are gone, and returns the
// list's resource version.
func (s *Source) relist(ctx context.Context) (string, error) {
	s.lists.Add(1)
	cutoff := time.Time{}
	if s.cutFirst && s.maxAge > 0 {
		cutoff = time.Now().Add(-s.maxAge)
	}
	obj, _, err := pager.New(s.list).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return "", err
	}
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return "", err
	}
	collapsed, ok := s.forwardListed(items, cutoff)
	if !ok {
		return "", ctx.Err()
	}
	rv := lm.GetResourceVersion()
	s.target.Progress(rv)
	if s.baseline {
		s.relists.Add(1)
		s.collapsed.Add(collapsed)
		s.log.Warn("listed events instead of resuming a watch: count raises made meanwhile collapsed into one occurrence",
			"collapsedRaises", collapsed, "events", len(items), "resourceVersion", rv)
	} else {
		s.log.Info("listed events", "events", len(items), "resourceVersion", rv, "tooOld", s.tooOld.Load(),
			"maxEventAge", s.maxAge.String())
	}
	s.baseline, s.cutFirst = true, false
	s.synced.Store(true)
	return rv, nil
}

// forwardListed forwards what the items of a list show that was not
// forwarded (but for the events not forwarded before and last seen before
// cutoff, recorded unforwarded), forgets the events forwarded before that
// are gone, and returns the count raises that collapsed, and false if the
// target stopped.
func (s *Source) forwardListed(items []runtime.Object, cutoff time.Time) (collapsed uint64, ok bool) {
	live := make(map[string]bool, len(items))
	for _, it := range items {
		o := occurrenceOf(it)
		if o == nil {
			continue
		}
		live[o.UID] = true
		o.listed = true
		prev, counted := s.forwarded[o.UID]
		if !counted && !o.LastTime.IsZero() && o.LastTime.Before(cutoff) {
			s.skipOld(o)
			continue
		}
		if s.baseline && o.Count > prev+1 {
			collapsed += uint64(o.Count - prev - 1)
		}
		if !s.forward(o) {
			return 0, false
		}
	}
	for uid := range s.forwarded {
		if !live[uid] {
			delete(s.forwarded, uid)
			s.target.Deleted(uid, "")
		}
	}
	return collapsed, true
}

// watchFrom watches from rv until the watch ends or ctx ends, forwarding
// every change, and returns the last resource version seen and why the
// watch ended.
func (s *Source) watchFrom(ctx context.Context, rv string) (string, error) {
	w, err := s.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return rv, err
	}
	s.watches.Add(1)
	s.synced.Store(true)
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return rv, errWatchClosed
		}
		if ev.Type == watch.Error {
			return rv, apierrors.FromObject(ev.Object)
		}
		next := rv
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			next = m.GetResourceVersion()
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if o := occurrenceOf(ev.Object); o != nil && !s.forward(o) {
				return rv, nil // shutting down
			}
		case watch.Deleted:
			s.deleted(ev.Object)
		case watch.Bookmark:
			s.target.Progress(next)
		}
		rv = next
	}
}

// occurrenceOf returns the occurrence of an event object, or nil. The
// occurrence keeps a copy of the event without its managed fields, which
// keeps the records smaller; obj itself is never written to: a watch may
// hand the same object to others (client-go's fake clientset hands its
// own stored object, which it reads concurrently).
func occurrenceOf(obj runtime.Object) *Occurrence {
	switch e := obj.(type) {
	case *corev1.Event:
		c := *e
		c.ManagedFields = nil
		return FromCore(&c)
	case *eventsv1.Event:
		c := *e
		c.ManagedFields = nil
		return FromEvents(&c)
	}
	return nil
}

// skipOld records an event older than the age cut-off as handled, without
// forwarding it.
func (s *Source) skipOld(o *Occurrence) {
	s.tooOld.Add(1)
	s.forwarded[o.UID] = o.Count
	if t, ok := s.target.(skipTarget); ok {
		t.skipped(o.UID, o.Count)
	}
}

// deleted forgets a deleted event.
func (s *Source) deleted(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	s.deletes.Add(1)
	uid := string(m.GetUID())
	if _, ok := s.forwarded[uid]; ok {
		delete(s.forwarded, uid)
		s.target.Deleted(uid, m.GetResourceVersion())
	}
}

// forward forwards o if it raised the count, and returns false if the
// target stopped (ctx ended).
func (s *Source) forward(o *Occurrence) bool {
	if prev, ok := s.forwarded[o.UID]; ok {
		if o.Count <= prev {
			s.updatesIgnored.Add(1)
			return true
		}
		o.raise = true
	}
	if err := s.target.Occurred(s.ctx, o); err != nil {
		return false // shutting down: not forwarded, not recorded
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
	return true
}

// Synced reports whether the source has listed, or resumed its watch.
func (s *Source) Synced() bool { return s.synced.Load() }

// Stats returns the source's counters.
func (s *Source) Stats() SourceStats {
	return SourceStats{Lists: s.lists.Load(), Watches: s.watches.Load(), Relists: s.relists.Load(),
		Collapsed: s.collapsed.Load(), Occurrences: s.occurrences.Load(),
		UpdatesIgnored: s.updatesIgnored.Load(), Deletes: s.deletes.Load(), TooOld: s.tooOld.Load(),
		Failures: s.failures.Load(),
		Lag:      time.Duration(s.lagNanos.Load()), Synced: s.synced.Load()}
}
