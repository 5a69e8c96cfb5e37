package fanoutctrl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrlrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fanout-go/fanout/debug"
	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/metrics"
	"github.com/fanout-go/fanout/k8s/record"
)

// errNilContext is Start's error for a nil context, as everywhere in the
// repository (controller-runtime's manager panics).
var errNilContext = errors.New("fanoutctrl: nil context; pass context.Background()")

// errAlreadyStarted is controller-runtime's error for a second Start.
var errAlreadyStarted = errors.New("manager already started")

// defaultRenewDeadline is controller-runtime's default
// manager.Options.RenewDeadline (unexported there), which sets the
// timeout of the leader election client.
const defaultRenewDeadline = 10 * time.Second

// Values of the "api" label of the metrics (see [WithMetrics]).
const (
	apiCore   = "core/v1"
	apiEvents = "events.k8s.io/v1"
)

// Manager is a controller-runtime [manager.Manager] whose event recorders
// are fanout's: GetEventRecorderFor records through a
// [record.Broadcaster] (core/v1 Events) and GetEventRecorder through an
// [events.Broadcaster] (events.k8s.io/v1), and so does leader election.
// Every other method is the wrapped manager's. Make it with [NewManager];
// pass it wherever controller-runtime takes a manager.
type Manager struct {
	manager.Manager

	cfg        config
	record     *record.Broadcaster
	events     *events.Broadcaster
	core       typedcorev1.EventsGetter
	httpClient *http.Client // the sinks', nil with the tests' fake sinks

	// scheme and logger are the wrapped manager's, set by NewManager
	// before anything can record.
	scheme *runtime.Scheme
	logger logr.Logger

	startOnce  sync.Once
	started    atomic.Bool // Start was called
	collectors []prometheus.Collector
	unview     []func() // take the broadcasters off WithDebugView's handler

	// graceful is the manager's GracefulShutdownTimeout (negative: no
	// bound); stopping, when the manager's stop began: Start's context
	// ended, or controller-runtime stopped its runnables (a runnable
	// failed, the leader election was lost).
	graceful time.Duration
	stopping atomic.Pointer[time.Time]

	// cancelWrites cancels the writes of the core/v1 sink the manager
	// made (coreSink), whose runner's watch is coreWatch; both nil with
	// WithCoreSink's sink.
	cancelWrites context.CancelFunc
	coreWatch    watch.Interface
}

var _ ctrlrecorder.Provider = (*Manager)(nil)

// NewManager returns a manager made by controller-runtime's manager.New
// (ctrl.NewManager) with config and options, whose event recorders are
// fanout's. It is a drop-in replacement for that call:
//
//	mgr, err := fanoutctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{...})
//
// What changes:
//
//   - GetEventRecorderFor and GetEventRecorder return recorders of a
//     [record.Broadcaster] and an [events.Broadcaster] (client-go's
//     decisions, counters for every drop, no goroutine per event). Their
//     sinks start when the first event is recorded or at
//     [Manager.Start], whichever comes first.
//   - With options.LeaderElection, the leader election's resource lock is
//     made here (with controller-runtime's leaderelection.NewResourceLock
//     and the same options) so that its events go through the same
//     broadcaster: every event is written once. controller-runtime's own
//     broadcasters are never started. Not when
//     options.LeaderElectionResourceLockInterface is set (your lock, your
//     recorder) or options.LeaderElectionConfig is (leader election in
//     another cluster: controller-runtime records its events there, as
//     before).
//   - [Manager.Start] flushes and shuts both broadcasters down, within
//     [WithShutdownTimeout], once controller-runtime's manager has
//     stopped (runnables and leader election included), so that the
//     events recorded until then are written.
//   - With [WithMetrics], the broadcasters' counters are exported to
//     Prometheus.
//
// options.EventBroadcaster, deprecated by controller-runtime, must be nil:
// tune the broadcasters with [WithRecordOptions] and [WithEventsOptions].
// The sinks use an HTTP client of their own made from config, as
// controller-runtime's events.k8s.io client does.
func NewManager(config *rest.Config, options manager.Options, opts ...Option) (*Manager, error) {
	if config == nil {
		return nil, errors.New("fanoutctrl: must specify Config")
	}
	//lint:ignore SA1019 checked so that it is not silently ignored
	if options.EventBroadcaster != nil {
		return nil, errors.New("fanoutctrl: manager.Options.EventBroadcaster must be nil: fanout's broadcasters replace it (tune them with WithRecordOptions)")
	}
	m := &Manager{cfg: newConfig(opts), graceful: DefaultGracefulShutdownTimeout}
	if options.GracefulShutdownTimeout != nil {
		m.graceful = *options.GracefulShutdownTimeout
	}
	if m.cfg.err != nil {
		return nil, m.cfg.err
	}
	// The sinks' HTTP client sends client-go's default user agent, as
	// controller-runtime's does (rest.HTTPClientFor puts the config's in
	// its transport): in a copy, as controller-runtime is given the
	// caller's config, which GetConfig returns unchanged, as manager.New's
	// does.
	sinkConfig := rest.CopyConfig(config)
	if sinkConfig.UserAgent == "" {
		sinkConfig.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	logger := options.Logger
	if logger.GetSink() == nil {
		logger = ctrllog.Log // manager.New's default too
	}
	m.logger = logger.WithName("events")
	if err := m.makeBroadcasters(sinkConfig); err != nil {
		return nil, err
	}
	if m.cfg.metrics {
		if err := m.registerMetrics(); err != nil {
			m.shutdownBroadcasters()
			return nil, err
		}
	}
	inner, err := m.wrap(config, options)
	if err != nil {
		m.unregisterMetrics()
		m.shutdownBroadcasters()
		return nil, err
	}
	m.Manager, m.scheme = inner, inner.GetScheme()
	if m.scheme == nil {
		m.scheme = scheme.Scheme
	}
	return m, nil
}

// wrap makes controller-runtime's manager (newInner), mounts the live view
// on it and adds the runnable that notes when its stop begins.
func (m *Manager) wrap(config *rest.Config, options manager.Options) (manager.Manager, error) {
	inner, err := m.newInner(config, options)
	if err != nil {
		return nil, err
	}
	if err := m.mountView(inner, options); err != nil {
		return nil, err
	}
	if err := inner.Add(stopMarker{m}); err != nil {
		return nil, err
	}
	return inner, nil
}

// newInner makes controller-runtime's manager, with a leader election lock
// whose recorder is m's (see NewManager).
func (m *Manager) newInner(config *rest.Config, options manager.Options) (manager.Manager, error) {
	if options.LeaderElection && options.LeaderElectionResourceLockInterface == nil && options.LeaderElectionConfig == nil {
		renew := defaultRenewDeadline
		if options.RenewDeadline != nil {
			renew = *options.RenewDeadline
		}
		lock, err := leaderelection.NewResourceLock(rest.CopyConfig(config), m, leaderelection.Options{
			LeaderElection:             true,
			LeaderElectionResourceLock: options.LeaderElectionResourceLock,
			LeaderElectionNamespace:    options.LeaderElectionNamespace,
			LeaderElectionID:           options.LeaderElectionID,
			RenewDeadline:              renew,
			LeaderLabels:               options.LeaderElectionLabels,
		})
		if err != nil {
			return nil, err
		}
		options.LeaderElectionResourceLockInterface = lock
	}
	return manager.New(config, options)
}

// makeBroadcasters makes both broadcasters and the core/v1 client, on an
// HTTP client of their own, before the wrapped manager: nothing of it is
// left to undo when making that fails. They start nothing.
func (m *Manager) makeBroadcasters(config *rest.Config) error {
	eventsSink, core := m.cfg.eventsSink, typedcorev1.EventsGetter(nil)
	if eventsSink == nil || m.cfg.coreSink == nil {
		httpClient, err := rest.HTTPClientFor(config)
		if err != nil {
			return err
		}
		m.httpClient = httpClient
		coreClient, err := typedcorev1.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return err
		}
		eventsClient, err := typedeventsv1.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return err
		}
		core = coreClient
		if eventsSink == nil {
			eventsSink = &events.EventSinkImpl{Interface: eventsClient}
		}
	}
	m.core = core
	logCtx := klog.NewContext(context.Background(), m.logger)
	rec, err := record.NewChecked(append([]record.BroadcasterOption{record.WithContext(logCtx)}, m.cfg.recordOpts...)...)
	if err != nil {
		return fmt.Errorf("fanoutctrl: WithRecordOptions: %w", err)
	}
	m.record = rec
	ev, err := events.New(eventsSink, m.cfg.eventsOpts...)
	if err != nil {
		rec.Shutdown()
		return fmt.Errorf("fanoutctrl: WithEventsOptions: %w", err)
	}
	m.events = ev
	return nil
}

// registerMetrics registers a collector per broadcaster (see WithMetrics).
func (m *Manager) registerMetrics() error {
	reg := m.registerer()
	m.collectors = []prometheus.Collector{
		metrics.NewCollector(m.record, prometheus.Labels{"api": apiCore}),
		metrics.NewCollector(m.events, prometheus.Labels{"api": apiEvents}),
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			m.collectors = nil
			return fmt.Errorf("fanoutctrl: registering the event metrics: %w", err)
		}
	}
	return nil
}

// mountView serves the live view on inner's metrics server, with both
// broadcasters registered (see WithDebugView).
func (m *Manager) mountView(inner manager.Manager, options manager.Options) error {
	v := m.cfg.view
	if v == nil {
		return nil
	}
	if options.Metrics.BindAddress == "0" {
		return errors.New(`fanoutctrl: WithDebugView: the metrics server is off (Metrics.BindAddress "0"): nowhere to serve the view`)
	}
	h := v.h
	if h == nil {
		var err error
		if h, err = debug.New(); err != nil {
			return err
		}
	}
	if err := inner.AddMetricsServerExtraHandler(v.path, h); err != nil {
		return fmt.Errorf("fanoutctrl: WithDebugView: %w", err)
	}
	m.unview = []func(){
		h.Register(debug.Recorder("events "+apiCore, m.record)),
		h.Register(debug.Recorder("events "+apiEvents, m.events)),
	}
	return nil
}

// RecordBroadcaster returns the core/v1 broadcaster behind
// GetEventRecorderFor, for its Stats and Flush.
func (m *Manager) RecordBroadcaster() *record.Broadcaster { return m.record }

// EventsBroadcaster returns the events.k8s.io/v1 broadcaster behind
// GetEventRecorder, for its Stats, SeriesEvicted and Flush.
func (m *Manager) EventsBroadcaster() *events.Broadcaster { return m.events }

// GetEventRecorderFor returns a core/v1 recorder of the manager's
// [record.Broadcaster] whose events have source component name, as
// controller-runtime's. The broadcaster's sink starts with its first
// event, if the manager has not started yet.
//
// Deprecated: controller-runtime deprecates the core/v1 events API; use
// GetEventRecorder.
func (m *Manager) GetEventRecorderFor(name string) record.EventRecorder {
	return &coreRecorder{m: m, name: name}
}

// GetEventRecorder returns an events.k8s.io/v1 recorder of the manager's
// [events.Broadcaster] reporting as controller name (ReportingInstance is
// name-hostname), as controller-runtime's. It also implements
// [events.EventRecorderLogger]. The broadcaster's sink starts with its
// first event, if the manager has not started yet.
func (m *Manager) GetEventRecorder(name string) ctrlrecorder.EventRecorder {
	return &eventsRecorder{m: m, name: name}
}

// Start starts recording to the API server (if no event did already),
// then runs controller-runtime's manager until ctx ends (see its Start).
// Once that has returned, every runnable and the leader election having
// stopped, it flushes both broadcasters and shuts them down, within what
// is left of the manager's GracefulShutdownTimeout (see
// [WithShutdownTimeout]); then it unregisters the metrics. It
// returns the wrapped manager's error. Events still unwritten at the bound
// are counted as dropped at shutdown (the broadcasters' Stats) and logged,
// but do not make Start fail. A nil ctx is an error, and starts nothing
// (controller-runtime's Start panics). A second call, concurrent with the
// first or not, returns controller-runtime's error ("manager already
// started") and leaves the recorders as they are.
func (m *Manager) Start(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if !m.started.CompareAndSwap(false, true) {
		// Not m.Manager.Start: a call racing the first one could start
		// the wrapped manager before it, and the first one would then
		// shut the recorders down under it.
		return errAlreadyStarted
	}
	m.startRecording()
	stopWatch := context.AfterFunc(ctx, m.markStopping)
	err := m.Manager.Start(ctx)
	stopWatch()
	lost := ctx.Err() == nil && err != nil && err.Error() == errLeaderElectionLost
	m.shutdown(m.shutdownTimeout(time.Now(), lost))
	return err
}

// errLeaderElectionLost is the text of the error controller-runtime's
// Start returns when the manager lost its leader election (it makes it
// with errors.New, so nothing else can tell it).
const errLeaderElectionLost = "leader election lost"

// markStopping notes that the manager's stop began now, unless it was
// noted already.
func (m *Manager) markStopping() {
	now := time.Now()
	m.stopping.CompareAndSwap(nil, &now)
}

// stopMarker is a runnable of the wrapped manager's that notes when its
// stop begins: controller-runtime cancels its context first thing, also
// when a runnable failed or the leader election was lost (Start's context
// still running then). It needs no leader election, so that it runs on
// every replica.
type stopMarker struct{ m *Manager }

func (s stopMarker) Start(ctx context.Context) error {
	<-ctx.Done()
	s.m.markStopping()
	return nil
}

func (stopMarker) NeedLeaderElection() bool { return false }

// shutdownTimeout returns the bound of the broadcasters' shutdown once the
// manager has stopped at now (see WithShutdownTimeout); 0 for none. After
// a lost leader election (lost), controller-runtime skips its grace
// period, and the bound is ShutdownTimeout, or WithShutdownTimeout's if
// less.
func (m *Manager) shutdownTimeout(now time.Time, lost bool) time.Duration {
	switch {
	case lost && m.cfg.shutdownTimeout > 0:
		return min(m.cfg.shutdownTimeout, ShutdownTimeout)
	case lost:
		return ShutdownTimeout
	case m.cfg.shutdownTimeout > 0:
		return m.cfg.shutdownTimeout
	case m.graceful < 0:
		return 0
	}
	since := now
	if t := m.stopping.Load(); t != nil {
		since = *t
	}
	return max(m.graceful-now.Sub(since), ShutdownTimeout)
}

// startRecording starts both sinks, and the loggers controller-runtime
// starts, once.
func (m *Manager) startRecording() {
	m.startOnce.Do(func() {
		if m.cfg.coreSink != nil {
			m.record.StartRecordingToSink(m.cfg.coreSink)
		} else {
			var ctx context.Context
			ctx, m.cancelWrites = context.WithCancel(context.Background())
			m.coreWatch = m.record.StartRecordingToSink(&coreSink{ctx: ctx, events: m.core.Events("")})
		}
		if err := m.events.StartRecordingToSinkWithContext(logr.NewContext(context.Background(), m.logger)); err != nil {
			m.logger.Error(err, "Unable to start recording events.k8s.io events")
		}
		// controller-runtime logs every event at V(1); the watchers cost a
		// goroutine and a copy of each event, so only when that is shown.
		if v := m.logger.V(1); v.Enabled() {
			m.record.StartEventWatcher(func(e *corev1.Event) {
				v.Info(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
			})
			if _, err := m.events.StartLogging(v); err != nil {
				m.logger.Error(err, "Unable to start logging events.k8s.io events")
			}
		}
	})
}

// shutdown flushes and shuts both broadcasters down, side by side, within
// timeout (0: no bound), and unregisters the metrics. The flush, in which
// failed writes are retried as usual, has half the bound: a write waiting
// to be retried (10 s and more) must not leave the shutdown no time for
// the last attempt of every queued event and the series' final writes.
// Then the core/v1 writes still in flight are cancelled and waited for.
func (m *Manager) shutdown(timeout time.Duration) {
	ctx, flushCtx := context.Background(), context.Background()
	if timeout > 0 {
		var cancel, cancelFlush context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		flushCtx, cancelFlush = context.WithTimeout(ctx, timeout/2)
		defer cancelFlush()
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, b := range []interface {
		Flush(context.Context) error
		ShutdownContext(context.Context) error
	}{m.record, m.events} {
		wg.Go(func() {
			_ = b.Flush(flushCtx) // what is not written by then gets its last attempt
			errs[i] = b.ShutdownContext(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		m.logger.Error(err, "Event recorders did not finish in time: the events not written are counted as dropped at shutdown", "timeout", timeout)
	}
	m.endWrites()
	if m.httpClient != nil {
		m.httpClient.CloseIdleConnections()
	}
	m.unregisterMetrics()
	for _, f := range m.unview {
		f()
	}
}

// endWrites cancels the writes of the core/v1 sink the manager made that
// are still in flight (an API server that does not answer: client-go's
// sinks take no context, and the HTTP client has no timeout unless the
// config sets one), and waits for its runner to end, and for the
// events.k8s.io sink and its series maintenance, whose writes in flight
// the bound cancelled (a second ShutdownContext waits for them), so that
// nothing of the recorders outlives Start and their Stats are final.
func (m *Manager) endWrites() {
	if m.cancelWrites != nil {
		m.cancelWrites()
		<-m.coreWatch.ResultChan()
	}
	_ = m.events.ShutdownContext(context.Background())
}

// shutdownBroadcasters shuts down the broadcasters of a manager that
// NewManager does not return: a record.WithContext among the options
// would keep its callback registered until its context ends.
func (m *Manager) shutdownBroadcasters() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	_ = m.record.ShutdownContext(ctx)
	_ = m.events.ShutdownContext(ctx)
}

// registerer returns WithMetrics's registry; controller-runtime's for a
// nil one, a typed nil pointer included.
func (m *Manager) registerer() prometheus.Registerer {
	if r := m.cfg.registerer; r != nil && !isNilPointer(r) {
		return r
	}
	return ctrlmetrics.Registry
}

// isNilPointer reports whether v holds a nil pointer.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// unregisterMetrics undoes registerMetrics.
func (m *Manager) unregisterMetrics() {
	reg := m.registerer()
	for _, c := range m.collectors {
		reg.Unregister(c)
	}
	m.collectors = nil
}
