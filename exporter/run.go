package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Options configures [Run].
type Options struct {
	// Config is the validated configuration (see [LoadConfig]).
	Config *Config
	// Client talks to the API server.
	Client kubernetes.Interface
	// Dynamic, unless the configuration has omitLookup: true, looks up
	// the objects events are about (see [Lookup]), mapping their kinds
	// with Discovery (nil: Client's). With Dynamic nil, nothing is looked
	// up, as with omitLookup: true.
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Listener, if set, serves /metrics, /healthz, /readyz and the live
	// view ([DebugViewPath]).
	Listener net.Listener
	// Metrics is the collector to fill; nil makes one. Run registers it
	// (and the Go and process collectors) on its own registry for
	// /metrics. With the configuration's metricsNamePrefix set, Run adds
	// kubernetes-event-exporter's metrics to it before registering it.
	Metrics *Metrics
	// LeaderElection, if set, makes Run lead only while it holds a Lease,
	// so that two replicas can run with one exporting.
	LeaderElection *LeaderElection
}

// LeaderElection configures leader election on a coordination.k8s.io Lease.
type LeaderElection struct {
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (the pod name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to client-go's
	// usual 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ErrLeadershipLost is returned by [Run] (alone, or joined with what the
// flush left unwritten: test it with errors.Is) when this replica stopped
// holding the Lease while ctx was still live, once its sinks have flushed;
// the process should exit and restart as a follower.
var ErrLeadershipLost = errors.New("leader election lost")

// Run exports events until ctx ends: it loads the checkpoint (and returns
// an error at once if a checkpoint file cannot be written), starts the
// pipeline and the source, and at the end stops the source, flushes the
// sinks within the configuration's shutdownTimeout and writes the last
// checkpoint (an error if it cannot). With leader election it does that only while it leads, and
// releases the Lease after the flush.
func Run(ctx context.Context, opts Options) error {
	e := &exporter{opts: opts, log: opts.Logger, metrics: opts.Metrics}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.metrics == nil {
		e.metrics = NewMetrics()
	}
	if prefix, ok := opts.Config.metricsPrefix(); ok && e.metrics.kee == nil {
		e.metrics.keeCompat(prefix)
	}
	if opts.Listener != nil {
		stop, err := e.serve(opts.Listener)
		if err != nil {
			return err
		}
		defer stop()
	}
	if opts.LeaderElection == nil {
		e.metrics.leader.Store(true)
		return e.lead(ctx)
	}
	return e.runElected(ctx)
}

type exporter struct {
	opts    Options
	log     *slog.Logger
	metrics *Metrics
	// lock is the Lease's lock with leader election: what a follower
	// saw of the leader, for its readiness.
	lock atomic.Pointer[acquiredLock]
}

// lead runs the pipeline and the source until ctx ends, then flushes.
func (e *exporter) lead(ctx context.Context) error {
	cfg := e.opts.Config
	store := e.store()
	ck, err := loadCheckpoint(ctx, store)
	if err != nil {
		return err
	}
	lookup, err := e.lookup()
	if err != nil {
		return err
	}
	p, err := NewPipeline(cfg, PipelineOptions{Store: store, Checkpoint: ck, Logger: e.log, Lookup: lookup})
	if err != nil {
		return err
	}
	src, err := NewSource(e.opts.Client, cfg.API, cfg.Namespace, p, ck, e.metrics.Lag.Observe)
	if err != nil {
		_ = p.Shutdown(ctx)
		return err
	}
	src.SetLogger(e.log)
	src.SetMaxAge(cfg.MaxEventAge())
	e.metrics.pipeline.Store(p)
	e.metrics.source.Store(src)
	e.log.Info("exporting events", "api", cfg.API, "namespace", cfg.Namespace, "receivers", len(cfg.Receivers),
		"checkpoint", ck != nil, "maxEventAge", cfg.MaxEventAge().String())
	src.Run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	err = p.Shutdown(sctx)
	e.log.Info("stopped", "err", err)
	return err
}

// loadCheckpoint loads the checkpoint of store (nil: none), and checks
// that a checkpoint file can be written (creating its directory), so that
// an exporter that could never write one does not start.
func loadCheckpoint(ctx context.Context, store CheckpointStore) (*Checkpoint, error) {
	if store == nil {
		return nil, nil
	}
	ck, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	if fs, ok := store.(FileStore); ok {
		if err := fs.check(); err != nil {
			return nil, err
		}
	}
	return ck, nil
}

// lookup returns the involved-object lookup, or nil when there is none
// (omitLookup: true, or no dynamic client).
func (e *exporter) lookup() (*Lookup, error) {
	cfg := e.opts.Config
	if cfg.OmitLookup {
		return nil, nil
	}
	if e.opts.Dynamic == nil {
		e.log.Info("involved objects are not looked up: no dynamic client (Options.Dynamic)")
		return nil, nil
	}
	disc := e.opts.Discovery
	if disc == nil {
		disc = e.opts.Client.Discovery()
	}
	l, err := NewLookup(e.opts.Dynamic, disc, LookupOptions{CacheSize: cfg.CacheSize, Logger: e.log})
	if err != nil {
		return nil, err
	}
	e.metrics.lookup.Store(l)
	return l, nil
}

func (e *exporter) store() CheckpointStore {
	c := e.opts.Config.Checkpoint
	switch {
	case c.File != "":
		return FileStore{Path: c.File}
	case c.ConfigMap != nil:
		return ConfigMapStore{Client: e.opts.Client, Namespace: c.ConfigMap.Namespace, Name: c.ConfigMap.Name}
	}
	return nil
}

// runElected leads while holding the Lease. The elector's own context
// outlives ctx until the flush is done, so that the Lease is released only
// after the last checkpoint is written.
func (e *exporter) runElected(ctx context.Context) error {
	le := e.opts.LeaderElection
	lock := e.newLock()
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	stopped := context.AfterFunc(ctx, func() {
		if !e.metrics.leader.Load() {
			leCancel() // not leading: nothing to flush
		}
	})
	defer stopped()
	led := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: le.Name,
		LeaseDuration: orDefault(le.LeaseDuration, 15*time.Second),
		RenewDeadline: orDefault(le.RenewDeadline, 10*time.Second),
		RetryPeriod:   orDefault(le.RetryPeriod, 2*time.Second),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				e.metrics.leader.Store(true)
				e.log.Info("leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
				runCtx, cancel := context.WithCancel(lctx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				led <- e.lead(runCtx)
				leCancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leCtx)
	if !lock.acquired.Load() {
		return nil // never led
	}
	// client-go runs OnStartedLeading on a goroutine of its own once it
	// has acquired the Lease, and Run returns as soon as a renewal
	// fails: wait for lead and its flush (Run owns what it started).
	err = <-led
	if ctx.Err() == nil && err == nil {
		return ErrLeadershipLost
	}
	if ctx.Err() == nil {
		return errors.Join(ErrLeadershipLost, err) // and what the flush left
	}
	return err
}

// newLock returns the lock of the Lease, which the readiness reads.
func (e *exporter) newLock() *acquiredLock {
	le := e.opts.LeaderElection
	lock := &acquiredLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     e.opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}, leaseDuration: orDefault(le.LeaseDuration, 15*time.Second)}
	e.lock.Store(lock)
	return lock
}

// acquiredLock is a resource lock that records whether this replica
// acquired it: a Create or Update that succeeded with its identity as the
// holder, which client-go makes before it starts OnStartedLeading. It
// also records what its reads show of the leader, for a follower's
// readiness (see [acquiredLock.following]).
type acquiredLock struct {
	resourcelock.Interface
	acquired      atomic.Bool
	leaseDuration time.Duration

	mu       sync.Mutex
	readErr  error     // the last read's error
	holder   string    // the holder the last read showed
	renewed  time.Time // the holder's last renewal the reads showed
	renewSaw time.Time // when a read first showed that renewal
}

func (l *acquiredLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.note(r, err)
	return err
}

func (l *acquiredLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.note(r, err)
	return err
}

func (l *acquiredLock) note(r resourcelock.LeaderElectionRecord, err error) {
	if err == nil && r.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
}

// Get reads the Lease, recording its holder and when its renewal was
// first seen, or the error.
func (l *acquiredLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readErr = err
	if err != nil {
		l.holder = ""
		return r, raw, err
	}
	if r.HolderIdentity != l.holder || !r.RenewTime.Time.Equal(l.renewed) {
		l.holder, l.renewed, l.renewSaw = r.HolderIdentity, r.RenewTime.Time, time.Now()
	}
	return r, raw, err
}

// holderSeen returns the Lease's holder as the last read showed it ("":
// none, or the read failed).
func (l *acquiredLock) holderSeen() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

// following reports whether this replica stands by behind a live leader:
// its last read of the Lease succeeded and showed another holder, whose
// renewal it saw less than a lease duration ago (by its own clock, as
// client-go judges expiry). Otherwise it says why not.
func (l *acquiredLock) following(now time.Time) (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.readErr != nil:
		return false, "the Lease cannot be read: " + l.readErr.Error()
	case l.holder == "" || l.holder == l.Identity():
		return false, "no leader holds the Lease"
	case now.Sub(l.renewSaw) > l.leaseDuration:
		return false, "the leader " + l.holder + " has not renewed the Lease for " + now.Sub(l.renewSaw).Round(time.Second).String()
	}
	return true, ""
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// serve serves /metrics, /healthz and /readyz (and their
// kubernetes-event-exporter names, /-/healthy and /-/ready) and the live
// view ([DebugViewPath]) on l until stop is called.
func (e *exporter) serve(l net.Listener) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(e.metrics); err != nil {
		return nil, err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	view, err := e.newView()
	if err != nil {
		return nil, err
	}
	mux.Handle(DebugViewPath, view)
	healthy := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("/healthz", healthy)
	mux.HandleFunc("/-/healthy", healthy)
	mux.HandleFunc("/readyz", e.readyz)
	mux.HandleFunc("/-/ready", e.readyz)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// readyz answers 200 while this replica does its part: it leads and its
// source has handled its initial list (or resumed its watch), or, with
// leader election, it stands by behind a live leader (see
// [exporter.ready]); 503 with the reason otherwise.
func (e *exporter) readyz(w http.ResponseWriter, _ *http.Request) {
	if ok, why := e.ready(time.Now()); !ok {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// ready reports whether this replica is ready, or why not. A leader is
// ready once its source is synced. A follower is ready only while it
// reads the Lease and sees another replica renew it: a follower that
// cannot read it (forbidden by RBAC: a Lease name the Role does not
// grant) or sees no live leader is not, since then no replica may be
// exporting. A follower must be ready behind a live leader, or a rolling
// update, which waits for its new pods to be ready, would never proceed.
func (e *exporter) ready(now time.Time) (bool, string) {
	if e.metrics.leader.Load() {
		if src := e.metrics.source.Load(); src != nil && src.Synced() {
			return true, ""
		}
		return false, "leading; the initial list of events is not handled yet"
	}
	if l := e.lock.Load(); l != nil {
		ok, why := l.following(now)
		return ok, "standing by: " + why
	}
	return false, "not started"
}
