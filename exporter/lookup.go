package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Lookup defaults.
const (
	// DefaultCacheSize is the lookup cache's size when the configuration's
	// cacheSize is 0 (kubernetes-event-exporter's default).
	DefaultCacheSize = 1024
	// DefaultLookupTTL is how long a looked-up object's metadata is used
	// before it is looked up again.
	DefaultLookupTTL = 5 * time.Minute
	// DefaultLookupErrorTTL is how long a failed lookup is remembered:
	// the object is not asked for again meanwhile, so that a kind the
	// role cannot read, or an unreachable API server, costs one request
	// per object per period, not one per occurrence.
	DefaultLookupErrorTTL = 10 * time.Second
	// DefaultLookupTimeout bounds one lookup (the mapping of the kind and
	// the get).
	DefaultLookupTimeout = 2 * time.Second
	// rediscoverEvery is the shortest time between two discoveries of the
	// API server's resources, made when a kind is not found in the last
	// one (a CustomResourceDefinition installed since).
	rediscoverEvery = time.Minute
)

// ObjectMeta is what a lookup found about an event's involved object: the
// fields kubernetes-event-exporter adds to a record's involvedObject.
type ObjectMeta struct {
	// Labels, Annotations and OwnerReferences are the object's.
	Labels          map[string]string
	Annotations     map[string]string
	OwnerReferences []metav1.OwnerReference
	// Deleted is true when the object was not found, when it is being
	// deleted (it has a deletion timestamp), or when the object of that
	// name has another UID than the event's reference (the referenced one
	// is gone).
	Deleted bool
}

// LookupOptions configures [NewLookup]; zero fields take the defaults.
type LookupOptions struct {
	// CacheSize bounds the cache, in objects ([DefaultCacheSize]).
	CacheSize int
	// TTL is how long a found object's metadata is used
	// ([DefaultLookupTTL]); ErrorTTL how long a failure is
	// ([DefaultLookupErrorTTL]).
	TTL, ErrorTTL time.Duration
	// Timeout bounds one lookup ([DefaultLookupTimeout]).
	Timeout time.Duration
	// Logger logs failed lookups; nil discards.
	Logger *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Lookup finds the labels, annotations and owner references of the objects
// events are about, as kubernetes-event-exporter does: the kind is mapped
// to a resource through the API server's discovery (kept in memory, and
// made again at most once a minute when a kind is missing from it), the
// object is read with the dynamic client, and the answer is kept in an LRU
// cache of CacheSize objects. An entry is keyed by the reference (kind,
// namespace, name, UID and, where the event has it, the object's resource
// version, so that an updated object is read again), and is used for TTL.
// A failed lookup (forbidden, unknown kind, timeout, ...) is counted,
// logged at debug level and remembered for ErrorTTL; it never stops the
// occurrence, which goes on without the metadata. Safe for concurrent use.
type Lookup struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	cache  *lru.Cache[corev1.ObjectReference, lookupEntry]
	opts   LookupOptions

	discovered atomic.Int64 // when the mapper was last reset, in Unix nanoseconds

	requests, hits, deleted atomic.Uint64
	errs                    [numLookupErrors]atomic.Uint64
}

type lookupEntry struct {
	meta    *ObjectMeta // nil for a failure
	fail    lookupError
	expires time.Time
}

// lookupError classifies failed lookups, the reason label of
// fanout_eventer_lookup_errors_total.
type lookupError int

const (
	lookupForbidden lookupError = iota // the role cannot get the kind
	lookupUnmapped                     // the kind is not served
	lookupTimeout                      // the lookup took, or would wait, longer than Timeout
	lookupOther                        // any other error
	numLookupErrors
)

func (e lookupError) String() string {
	return [...]string{"forbidden", "unmapped", "timeout", "error"}[e]
}

// NewLookup returns a lookup reading objects with dyn and mapping kinds
// with disc's discovery.
func NewLookup(dyn dynamic.Interface, disc discovery.DiscoveryInterface, opts LookupOptions) (*Lookup, error) {
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	opts.TTL = orDefault(opts.TTL, DefaultLookupTTL)
	opts.ErrorTTL = orDefault(opts.ErrorTTL, DefaultLookupErrorTTL)
	opts.Timeout = orDefault(opts.Timeout, DefaultLookupTimeout)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cache, err := lru.New[corev1.ObjectReference, lookupEntry](opts.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("lookup cache: %w", err)
	}
	l := &Lookup{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		cache: cache, opts: opts}
	l.discovered.Store(opts.Now().UnixNano())
	return l, nil
}

// Get returns the metadata of the object ref refers to, or nil if the
// lookup failed (or ctx ended).
func (l *Lookup) Get(ctx context.Context, ref corev1.ObjectReference) *ObjectMeta {
	key := corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace,
		Name: ref.Name, UID: ref.UID, ResourceVersion: ref.ResourceVersion}
	now := l.opts.Now()
	if e, ok := l.cache.Get(key); ok && now.Before(e.expires) {
		l.hits.Add(1)
		if e.meta == nil {
			l.errs[e.fail].Add(1)
		}
		return e.meta
	}
	lctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	m, err := l.fetch(lctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil // shutting down: neither counted nor remembered
		}
		kind := classify(lctx, err)
		l.errs[kind].Add(1)
		l.opts.Logger.Debug("involved object not looked up", "kind", ref.Kind, "namespace", ref.Namespace,
			"name", ref.Name, "reason", kind.String(), "err", err)
		l.cache.Add(key, lookupEntry{fail: kind, expires: now.Add(l.opts.ErrorTTL)})
		return nil
	}
	if m.Deleted {
		l.deleted.Add(1)
	}
	l.cache.Add(key, lookupEntry{meta: m, expires: now.Add(l.opts.TTL)})
	return m
}

func classify(ctx context.Context, err error) lookupError {
	switch {
	case apierrors.IsForbidden(err):
		return lookupForbidden
	case meta.IsNoMatchError(err):
		return lookupUnmapped
	case ctx.Err() != nil || apierrors.IsTimeout(err) || strings.Contains(err.Error(), "rate limiter Wait"):
		// client-go's rate limiter fails at once a wait that would
		// outlast the lookup's deadline: throttled beyond the bound.
		return lookupTimeout
	}
	return lookupOther
}

// fetch maps the reference's kind to a resource and gets the object.
func (l *Lookup) fetch(ctx context.Context, ref corev1.ObjectReference) (*ObjectMeta, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: ref.Kind}}
	}
	mapping, err := l.mapping(gv.WithKind(ref.Kind))
	if err != nil {
		return nil, err
	}
	ri := l.dyn.Resource(mapping.Resource)
	var get dynamic.ResourceInterface = ri
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		get = ri.Namespace(ref.Namespace)
	}
	l.requests.Add(1)
	obj, err := get.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &ObjectMeta{Deleted: true}, nil
	case err != nil:
		return nil, err
	case ref.UID != "" && obj.GetUID() != ref.UID:
		return &ObjectMeta{Deleted: true}, nil // another object of that name
	}
	return &ObjectMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(),
		OwnerReferences: obj.GetOwnerReferences(), Deleted: obj.GetDeletionTimestamp() != nil}, nil
}

// mapping maps a kind to its resource, discovering the API server's
// resources again (at most once per rediscoverEvery) when the kind is
// unknown.
func (l *Lookup) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	gk, versions := gvk.GroupKind(), []string{gvk.Version}
	if gvk.Version == "" {
		versions = nil
	}
	m, err := l.mapper.RESTMapping(gk, versions...)
	if err == nil || !meta.IsNoMatchError(err) {
		return m, err
	}
	last, now := l.discovered.Load(), l.opts.Now().UnixNano()
	if now-last < int64(rediscoverEvery) || !l.discovered.CompareAndSwap(last, now) {
		return nil, err // discovered recently, or being discovered again
	}
	l.mapper.Reset()
	return l.mapper.RESTMapping(gk, versions...)
}

// LookupStats is a snapshot of a [Lookup]'s counters.
type LookupStats struct {
	// Requests counts the gets sent to the API server; CacheHits the
	// lookups the cache answered; Deleted the objects found missing or
	// being deleted.
	Requests, CacheHits, Deleted uint64
	// Errors counts failed lookups by reason (forbidden, unmapped,
	// timeout, error), a failure remembered by the cache included.
	Errors map[string]uint64
}

// Stats returns the lookup's counters.
func (l *Lookup) Stats() LookupStats {
	s := LookupStats{Requests: l.requests.Load(), CacheHits: l.hits.Load(), Deleted: l.deleted.Load(),
		Errors: make(map[string]uint64, numLookupErrors)}
	for i := range l.errs {
		s.Errors[lookupError(i).String()] = l.errs[i].Load()
	}
	return s
}
