package fanoutctrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fanout-go/fanout/debug"
	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// offline is the configuration of an API server that is never contacted:
// the tests here start no cache, no leader election and no metrics server,
// and their events go to fake sinks.
var offline = &rest.Config{Host: "https://127.0.0.1:1"}

// withSinks makes the manager write to fake sinks instead of the API
// server's.
func withSinks(core record.EventSink, ev events.EventSink) Option {
	return optionFunc(func(c *config) { c.coreSink, c.eventsSink = core, ev })
}

// fakes are the fake sinks of a test manager.
type fakes struct {
	core   *apitest.CoreSink
	events *apitest.EventsSink
}

func newTestManager(t *testing.T, options manager.Options, opts ...Option) (*Manager, fakes) {
	t.Helper()
	f := fakes{core: apitest.NewCoreSink(), events: &apitest.EventsSink{}}
	options.Metrics = metricsserver.Options{BindAddress: "0"}
	if options.Logger.GetSink() == nil {
		options.Logger = logr.Discard()
	}
	m, err := NewManager(offline, options, append([]Option{withSinks(f.core, f.events)}, opts...)...)
	require.NoError(t, err)
	return m, f
}

// run starts m and returns a function that stops it and returns Start's
// error.
func run(t *testing.T, m *Manager) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// logLines returns a logger showing verbosity v and what it logged.
func logLines(v int) (logr.Logger, func() []string) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: v})
	return logger, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
}

// Both getters record through fanout's broadcasters: the events reach the
// sinks as client-go's recorders would write them, with the name as the
// source component (core/v1) and the reporting controller
// (events.k8s.io/v1).
func TestRecordersWriteThroughFanoutBroadcasters(t *testing.T) {
	m, f := newTestManager(t, manager.Options{})
	stop := run(t, m)
	core := m.GetEventRecorderFor("pods")
	ev := m.GetEventRecorder("pods")
	for range 3 {
		core.Eventf(pod("web"), corev1.EventTypeNormal, "Synced", "synced %s", "web")
		ev.Eventf(pod("web"), nil, corev1.EventTypeWarning, "BackOff", "Restart", "restarting %s", "web")
	}
	ev.AnnotatedEventf(pod("db"), nil, map[string]string{"a": "b"}, corev1.EventTypeNormal, "Synced", "Sync", "ok")
	require.NoError(t, stop())

	assert.Equal(t, []string{"create", "patch", "patch"}, f.core.Ops(), "a count of 3")
	first := f.core.Calls()[0].Event
	assert.Equal(t, "pods", first.Source.Component)
	assert.Equal(t, "Pod", first.InvolvedObject.Kind)
	assert.Equal(t, "synced web", first.Message)

	// web: created, a series of 2, and its final count (3) at shutdown;
	// db: created, with its annotation (written side by side with web's).
	byObject := map[string][]apitest.Call[*eventsv1.Event]{}
	for _, c := range f.events.Calls() {
		byObject[c.Event.Regarding.Name] = append(byObject[c.Event.Regarding.Name], c)
	}
	web, db := byObject["web"], byObject["db"]
	require.Len(t, web, 3)
	require.Len(t, db, 1)
	assert.Equal(t, []string{"create", "patch", "patch"}, []string{web[0].Op, web[1].Op, web[2].Op})
	assert.Equal(t, "pods", web[0].Event.ReportingController)
	assert.EqualValues(t, 3, web[2].Event.Series.Count)
	assert.Equal(t, "create", db[0].Op)
	assert.Equal(t, map[string]string{"a": "b"}, db[0].Event.Annotations)
	assert.Zero(t, m.RecordBroadcaster().Stats().Dropped())
	assert.Zero(t, m.EventsBroadcaster().Stats().Dropped())
}

// Events recorded before Start start the sinks, as controller-runtime's
// lazy recorders do; events recorded after Start has returned are refused
// (counted), and nothing is started again.
func TestRecordersStartSinksLazilyAndRefuseAfterStart(t *testing.T) {
	m, f := newTestManager(t, manager.Options{})
	core := m.GetEventRecorderFor("early")
	ev := m.GetEventRecorder("early")
	assert.Zero(t, m.RecordBroadcaster().Stats().Sinks, "nothing started before an event")
	core.Event(pod("web"), corev1.EventTypeNormal, "Early", "before Start")
	ev.Eventf(pod("web"), nil, corev1.EventTypeNormal, "Early", "Setup", "before Start")
	assert.EqualValues(t, 1, m.RecordBroadcaster().Stats().Sinks)
	require.NoError(t, run(t, m)())
	assert.Len(t, f.core.Calls(), 1)
	assert.Len(t, f.events.Calls(), 1)

	core.Event(pod("web"), corev1.EventTypeNormal, "Late", "after Start")
	ev.Eventf(pod("web"), nil, corev1.EventTypeNormal, "Late", "Stop", "after Start")
	assert.EqualValues(t, 1, m.RecordBroadcaster().Stats().Refused)
	assert.EqualValues(t, 1, m.EventsBroadcaster().Stats().Refused)
	assert.Len(t, f.core.Calls(), 1)
}

// A recorder given a logger with WithLogger logs to it: an event about
// a nil object is logged there, and counted as invalid.
func TestRecorderWithLoggerLogsThere(t *testing.T) {
	m, _ := newTestManager(t, manager.Options{})
	logger, lines := logLines(0)
	core := m.GetEventRecorderFor("pods").(record.EventRecorderLogger).WithLogger(logger)
	ev := m.GetEventRecorder("pods").(events.EventRecorderLogger).WithLogger(logger)
	core.Event(nil, corev1.EventTypeNormal, "R", "m")
	ev.Eventf(nil, nil, corev1.EventTypeNormal, "R", "A", "m")
	require.NoError(t, run(t, m)())
	assert.Len(t, lines(), 2, "%q", lines())
	assert.EqualValues(t, 1, m.RecordBroadcaster().Stats().Invalid)
	assert.EqualValues(t, 1, m.EventsBroadcaster().Stats().Invalid)
}

// When the manager's logger shows V(1), every event is logged there, as
// controller-runtime does.
func TestEventsLoggedAtV1WhenShown(t *testing.T) {
	logger, lines := logLines(1)
	m, _ := newTestManager(t, manager.Options{Logger: logger})
	stop := run(t, m)
	m.GetEventRecorderFor("pods").Event(pod("web"), corev1.EventTypeNormal, "Synced", "core note")
	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "Synced", "Sync", "events note")
	require.NoError(t, stop())
	all := strings.Join(lines(), "\n")
	assert.Contains(t, all, "core note")
	assert.Contains(t, all, "events note")
}

// Start is bounded by WithShutdownTimeout even when the API server never
// answers: the events not written are counted as dropped at shutdown, the
// write in flight once its context is cancelled.
func TestStartReturnsWithinShutdownTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t, manager.Options{}, WithShutdownTimeout(time.Minute))
		release := make(chan struct{})
		defer close(release)
		f.events.Hold = func(apitest.Call[*eventsv1.Event]) <-chan struct{} { return release }
		stop := run(t, m)
		for i := range 3 {
			m.GetEventRecorder("pods").Eventf(pod(fmt.Sprint("p", i)), nil, corev1.EventTypeNormal, "R", "A", "m")
		}
		start := time.Now()
		require.NoError(t, stop())
		assert.Equal(t, time.Minute, time.Since(start), "the bound, on the bubble's clock")
		synctest.Wait()
		st := m.EventsBroadcaster().Stats()
		assert.EqualValues(t, 3, st.Recorded)
		assert.EqualValues(t, 3, st.DroppedShutdown, "the write in flight and the two queued: %+v", st)
		assert.Zero(t, st.Sinks, "the sink has stopped")
	})
}

// WithMetrics registers one collector per broadcaster, told apart by the
// api label, and Start unregisters them when it returns; a registry that
// has them already refuses a second manager's.
func TestWithMetricsRegistersUntilStartReturns(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, _ := newTestManager(t, manager.Options{}, WithMetrics(reg))
	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "m")
	apis := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "fanout_k8s_events_recorded_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "api" {
					apis[l.GetValue()] = mt.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, map[string]float64{"core/v1": 0, "events.k8s.io/v1": 1}, apis)

	_, err = NewManager(offline, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()},
		WithMetrics(reg))
	assert.ErrorContains(t, err, "registering the event metrics")

	require.NoError(t, run(t, m)())
	mfs, err = reg.Gather()
	require.NoError(t, err)
	assert.Empty(t, mfs, "unregistered")
}

// The deprecated EventBroadcaster option is refused rather than ignored.
func TestNewManagerRefusesEventBroadcaster(t *testing.T) {
	b := record.New()
	defer b.Shutdown()
	//lint:ignore SA1019 the deprecated option is tested
	_, err := NewManager(offline, manager.Options{EventBroadcaster: b})
	assert.ErrorContains(t, err, "EventBroadcaster must be nil")
	_, err = NewManager(nil, manager.Options{})
	assert.Error(t, err)
}

// GetConfig returns the configuration the manager was given, the same
// one and unchanged, as controller-runtime's manager does (its own test "should not
// manipulate the provided config"): the user agent the sinks' clients
// get by default is not written into it.
func TestGetConfigReturnsTheGivenConfigUnchanged(t *testing.T) {
	given := &rest.Config{Host: "https://127.0.0.1:1", QPS: 7}
	want := rest.CopyConfig(given)
	options := manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()}
	m, err := NewManager(given, options)
	require.NoError(t, err)
	defer m.shutdownBroadcasters()
	assert.Same(t, given, m.GetConfig())
	assert.Equal(t, want, given, "the caller's config was changed")
	other := rest.CopyConfig(want)
	upstream, err := manager.New(other, options)
	require.NoError(t, err)
	assert.Same(t, other, upstream.GetConfig())
	assert.Equal(t, want, other)
}

// A manager that cannot be made leaves nothing registered: here the
// leader election lock has no ID.
func TestNewManagerErrorLeavesNoMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewManager(offline, manager.Options{LeaderElection: true, LeaderElectionNamespace: "ns", Logger: logr.Discard()},
		WithMetrics(reg))
	assert.ErrorContains(t, err, "LeaderElectionID must be configured")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.Empty(t, mfs)
}

// A bad option value, the manager's own or one passed on to a
// broadcaster, is an error of NewManager naming the option, not a panic.
func TestNewManagerReturnsBadOptionValuesAsErrors(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithShutdownTimeout(-time.Second), "WithShutdownTimeout(-1s)"},
		{WithRecordOptions(record.WithQueueLength(0)), "WithRecordOptions: record: WithQueueLength(0)"},
		{WithEventsOptions(events.WithQueueLength(0)), "WithEventsOptions: events: WithQueueLength(0)"},
	} {
		var err error
		assert.NotPanics(t, func() {
			_, err = NewManager(offline, manager.Options{Logger: logr.Discard()},
				withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), tc.opt)
		})
		assert.ErrorContains(t, err, tc.want)
	}
}

// controller-runtime refuses a second Start ("manager already started")
// and leaves the running manager alone; so does this one: the running
// manager's broadcasters and metrics stay. It used to shut them down.
func TestSecondStartLeavesTheRunningManagerRecording(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, f := newTestManager(t, manager.Options{}, WithMetrics(reg))
	stop := run(t, m)
	<-m.Elected()
	require.ErrorContains(t, m.Start(context.Background()), "already started")

	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "after the second Start")
	m.GetEventRecorderFor("pods").Event(pod("web"), corev1.EventTypeNormal, "R", "after the second Start")
	require.NoError(t, m.EventsBroadcaster().Flush(t.Context()))
	require.NoError(t, m.RecordBroadcaster().Flush(t.Context()))
	assert.Zero(t, m.EventsBroadcaster().Stats().Refused)
	assert.Zero(t, m.RecordBroadcaster().Stats().Refused)
	assert.Len(t, f.events.Calls(), 1)
	assert.Len(t, f.core.Calls(), 1)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.NotEmpty(t, mfs, "the metrics stay registered")
	require.NoError(t, stop())
}

// A write failing once (an API server blip) as the manager stops: by
// default the flush has half of what is left of the manager's
// GracefulShutdownTimeout (30 s), which waits through the retry pause (10 s
// and more for events.k8s.io): nothing is lost. With a bound of 5 s, it
// costs that event only: the flush has half the bound, and the rest leaves
// every queued event its last attempt and the open series their final
// count, as the broadcaster's ShutdownContext alone does (a flush with the
// whole bound lost all four events).
func TestATransientFailureAtStopLosesOnlyTheEventBeingRetried(t *testing.T) {
	for _, tc := range []struct {
		opts    []Option
		dropped uint64
	}{{nil, 0}, {[]Option{WithShutdownTimeout(5 * time.Second)}, 1}} {
		synctest.Test(t, func(t *testing.T) {
			m, f := newTestManager(t, manager.Options{}, tc.opts...)
			failed := false
			f.events.Fail = func(c apitest.Call[*eventsv1.Event]) error {
				if c.Event.Regarding.Name == "a" && !failed {
					failed = true
					return errors.New("connection reset by peer") // retried
				}
				return nil
			}
			stop := run(t, m)
			r := m.GetEventRecorder("pods")
			r.Eventf(pod("a"), nil, corev1.EventTypeNormal, "R", "A", "m")
			for range 3 {
				r.Eventf(pod("b"), nil, corev1.EventTypeNormal, "R", "A", "m")
			}
			synctest.Wait() // a failed and waits to be retried; b written
			require.NoError(t, stop())
			st := m.EventsBroadcaster().Stats()
			assert.EqualValues(t, tc.dropped, st.Dropped(), "a, in its retry pause: %+v; sink calls %q", st, f.events.Ops())
			assert.EqualValues(t, 3-tc.dropped, st.Written, "b created, then its series with the final count 3; a")
			assert.EqualValues(t, 1, st.Merged)
		})
	}
}

// hangingServer is an API server that accepts event writes and never
// answers them, until the test ends.
func hangingServer(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

// A core/v1 write still in flight at the shutdown bound (an API server
// that does not answer) is cancelled, and the sink has ended when Start
// returns, as the package doc says. client-go's sink writes with
// context.Background(), and the HTTP client has no timeout: the write
// outlived Start.
func TestCoreWritesInFlightEndWithStart(t *testing.T) {
	srv := hangingServer(t)
	before := goleak.IgnoreCurrent()
	cfg := &rest.Config{Host: srv.URL}
	m, err := NewManager(cfg, manager.Options{Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"}},
		withSinks(nil, &apitest.EventsSink{}), WithShutdownTimeout(200*time.Millisecond))
	require.NoError(t, err)
	stop := run(t, m)
	m.GetEventRecorderFor("pods").Event(pod("web"), corev1.EventTypeNormal, "R", "m")
	require.NoError(t, stop())
	assert.EqualValues(t, 1, m.RecordBroadcaster().Stats().DroppedShutdown)
	// The server's side of the connection and controller-runtime's own
	// broadcasters (which end shortly after Start) aside.
	assert.NoError(t, goleak.Find(before, goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/tools/record.(*eventBroadcasterImpl).StartRecordingToSink.func1")))
}

// A typed nil registry given to WithMetrics (var reg *prometheus.Registry)
// means controller-runtime's, as a nil one does. It panicked.
func TestWithMetricsTakesATypedNilRegistryAsTheDefault(t *testing.T) {
	var reg *prometheus.Registry
	m, err := NewManager(offline, manager.Options{Logger: logr.Discard()},
		withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), WithMetrics(reg))
	require.NoError(t, err)
	assert.Equal(t, prometheus.Registerer(ctrlmetrics.Registry), m.registerer())
	m.unregisterMetrics()
}

// wireRequest is an event write as the API server received it.
type wireRequest struct {
	Method, Path, UserAgent, ContentType, Accept string
	Body                                         map[string]any
}

// wireServer is an API server that stores every event write it gets.
type wireServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []wireRequest
}

func newWireServer(t *testing.T) *wireServer {
	w := &wireServer{}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.Close)
	return w
}

func (w *wireServer) serve(rw http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.URL.Path, "/events") {
		http.NotFound(rw, r)
		return
	}
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil); err == nil {
		js, _ := json.Marshal(obj)
		_ = json.Unmarshal(js, &body)
	} else {
		_ = json.Unmarshal(data, &body)
	}
	w.mu.Lock()
	w.reqs = append(w.reqs, wireRequest{r.Method, r.URL.Path, r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), r.Header.Get("Accept"), body})
	w.mu.Unlock()
	rw.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	rw.WriteHeader(http.StatusCreated)
	_, _ = rw.Write(data)
}

// requests returns the writes received, by path and reason, without the names and
// times that differ from run to run.
func (w *wireServer) requests() []wireRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.reqs)
	for _, r := range out {
		if md, ok := r.Body["metadata"].(map[string]any); ok {
			delete(md, "name")
			delete(md, "creationTimestamp")
		}
		for _, k := range []string{"eventTime", "firstTimestamp", "lastTimestamp", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"} {
			delete(r.Body, k)
		}
	}
	key := func(r wireRequest) string { return r.Path + " " + fmt.Sprint(r.Body["reason"]) }
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// Events recorded through this manager reach the API server as those of
// controller-runtime's own manager do: the same requests, headers and
// bodies (names and times aside), for both event APIs.
func TestEventsReachTheAPIServerAsControllerRuntimesDo(t *testing.T) {
	var got [2][]wireRequest
	for i, newManager := range []func(*rest.Config, manager.Options) (manager.Manager, error){
		manager.New,
		func(c *rest.Config, o manager.Options) (manager.Manager, error) { return NewManager(c, o) },
	} {
		srv := newWireServer(t)
		mgr, err := newManager(&rest.Config{Host: srv.URL},
			manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		//lint:ignore SA1019 compared with controller-runtime's
		mgr.GetEventRecorderFor("pods").Eventf(pod("web"), corev1.EventTypeWarning, "Failed", "failed %d", 1)
		mgr.GetEventRecorder("pods").Eventf(pod("web"), pod("db"), corev1.EventTypeNormal, "Synced", "Sync", "synced %s", "web")
		mgr.GetEventRecorder("pods").AnnotatedEventf(pod("web"), nil, map[string]string{"k": "v"}, corev1.EventTypeNormal, "Annotated", "Sync", "ann")
		require.Eventually(t, func() bool { return len(srv.requests()) == 3 }, 10*time.Second, 10*time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		got[i] = srv.requests()
	}
	assert.Equal(t, got[0], got[1])
}

// gateSink is a logger that shows nothing and, once armed, holds the
// first caller asking whether V(1) is shown until the gate closes: the
// first Start asks that before it starts controller-runtime's manager.
type gateSink struct {
	armed   *atomic.Bool
	once    *sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (s gateSink) Enabled(level int) bool {
	if level == 1 && s.armed.Load() {
		s.once.Do(func() { close(s.entered); <-s.gate })
	}
	return false
}
func (s gateSink) Init(logr.RuntimeInfo)          {}
func (s gateSink) Info(int, string, ...any)       {}
func (s gateSink) Error(error, string, ...any)    {}
func (s gateSink) WithName(string) logr.LogSink   { return s }
func (s gateSink) WithValues(...any) logr.LogSink { return s }

// Of two concurrent Starts, the one that loses returns controller-runtime's
// error and the other runs the manager with its recorders. The loser used
// to start controller-runtime's manager itself when it got there first:
// the winner then got "manager already started" and shut the recorders
// down under the running manager, which refused every event.
func TestConcurrentStartsRunTheManagerOnceWithItsRecorders(t *testing.T) {
	gs := gateSink{armed: &atomic.Bool{}, once: &sync.Once{}, entered: make(chan struct{}), gate: make(chan struct{})}
	m, f := newTestManager(t, manager.Options{Logger: logr.New(gs)})
	gs.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- m.Start(ctx) }()
	<-gs.entered // the first Start is between its check and the manager's Start
	second := make(chan error, 1)
	go func() { second <- m.Start(ctx) }()
	select {
	case err := <-second:
		assert.ErrorContains(t, err, "manager already started")
	case <-time.After(200 * time.Millisecond):
		t.Error("the second Start runs the manager")
		defer func() { <-second }()
	}
	close(gs.gate)
	<-m.Elected()

	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "while running")
	require.NoError(t, m.EventsBroadcaster().Flush(t.Context()))
	assert.Zero(t, m.EventsBroadcaster().Stats().Refused)
	assert.Len(t, f.events.Calls(), 1)
	cancel()
	require.NoError(t, <-first)
}

// doneCtx is a context of a type the context package does not know, so
// that whatever follows it (context.WithCancel, context.AfterFunc) does so
// on a goroutine of its own until one of the two ends.
type doneCtx struct {
	context.Context
	done chan struct{}
}

func (c doneCtx) Done() <-chan struct{} { return c.done }

func (c doneCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// A manager that NewManager fails to make (after its broadcasters) has
// its broadcasters shut down: a record.WithContext among the options
// would otherwise stay followed, here by goroutines, until its context
// ends.
func TestNewManagerErrorShutsTheBroadcastersDown(t *testing.T) {
	ctx := doneCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(ctx.done)
	before := goleak.IgnoreCurrent()
	_, err := NewManager(offline, manager.Options{LeaderElection: true, LeaderElectionNamespace: "ns", Logger: logr.Discard()},
		withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), WithRecordOptions(record.WithContext(ctx)))
	require.ErrorContains(t, err, "LeaderElectionID must be configured")
	assert.NoError(t, goleak.Find(before))
}

// Start with a nil context returns an error, as every call of the
// repository does, and starts nothing: a later Start runs the manager.
// It panicked, in controller-runtime's Start, after the sinks had started,
// and left the manager marked started, its sinks never shut down.
func TestStartWithANilContextIsAnErrorAndStartsNothing(t *testing.T) {
	m, f := newTestManager(t, manager.Options{})
	var err error
	assert.NotPanics(t, func() {
		//lint:ignore SA1012 the nil context is tested
		err = m.Start(nil) //nolint:staticcheck
	})
	assert.ErrorContains(t, err, "nil context")
	assert.Zero(t, m.RecordBroadcaster().Stats().Sinks, "nothing started")

	stop := run(t, m)
	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "m")
	require.NoError(t, stop())
	assert.Len(t, f.events.Calls(), 1)
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// WithDebugView serves the live view on the manager's metrics server, both
// broadcasters in it beside what the program registered itself, until
// Start returns.
func TestWithDebugViewServesTheBroadcastersOnTheMetricsServer(t *testing.T) {
	h, err := debug.New()
	require.NoError(t, err)
	h.Register(debug.Fields("app", func() []debug.Field { return []debug.Field{{Name: "mode", Value: "test"}} }))
	addr := freeAddr(t)
	m, err := NewManager(offline, manager.Options{Metrics: metricsserver.Options{BindAddress: addr}, Logger: logr.Discard()},
		withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), WithDebugView("", h))
	require.NoError(t, err)
	stop := run(t, m)
	m.GetEventRecorderFor("pods").Eventf(pod("web"), corev1.EventTypeNormal, "Synced", "synced")
	require.NoError(t, m.RecordBroadcaster().Flush(context.Background()))

	var p debug.Page
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get("http://" + addr + DefaultDebugViewPath + "?format=json")
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		assert.Equal(c, http.StatusOK, resp.StatusCode)
		assert.NoError(c, json.NewDecoder(resp.Body).Decode(&p))
	}, 10*time.Second, 50*time.Millisecond, "the metrics server serves the view")
	var names []string
	for _, s := range p.Sections {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"app", "events core/v1", "events events.k8s.io/v1"}, names)
	core := p.Sections[1]
	assert.Contains(t, core.Fields, debug.Field{Name: "recorded", Value: 1.0})
	require.Len(t, core.Broadcasters, 1)
	require.NotEmpty(t, core.Broadcasters[0].WatcherList)
	sink := core.Broadcasters[0].WatcherList[0]
	require.NotNil(t, sink.Runner, "the sink's runner beside its watcher")
	assert.Equal(t, uint64(1), sink.Runner.Written)

	require.NoError(t, stop())
	assert.Len(t, h.Page(0).Sections, 1, "the manager's sections leave with it")
}

// The view needs the metrics server; a path taken is refused too.
func TestWithDebugViewNeedsTheMetricsServer(t *testing.T) {
	_, err := NewManager(offline, manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard()},
		withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), WithDebugView("/debug/fanout", nil))
	assert.ErrorContains(t, err, "the metrics server is off")
	_, err = NewManager(offline, manager.Options{Logger: logr.Discard(), Metrics: metricsserver.Options{
		BindAddress: freeAddr(t), ExtraHandlers: map[string]http.Handler{"/taken": http.NotFoundHandler()}}},
		withSinks(apitest.NewCoreSink(), &apitest.EventsSink{}), WithDebugView("/taken", nil))
	assert.ErrorContains(t, err, "WithDebugView")
}
