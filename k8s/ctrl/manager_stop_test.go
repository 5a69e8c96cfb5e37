package fanoutctrl

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
)

// losableLock is a resource lock held by this manager until lose is set,
// when every call fails as with an API server that went away.
type losableLock struct {
	mu   sync.Mutex
	rec  *resourcelock.LeaderElectionRecord
	lose atomic.Bool
}

func (l *losableLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.lose.Load() {
		return nil, nil, errors.New("connection refused")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "lock")
	}
	r := *l.rec
	return &r, []byte(r.HolderIdentity + r.RenewTime.String()), nil
}

func (l *losableLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = &r
	return nil
}

func (l *losableLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	if l.lose.Load() {
		return errors.New("connection refused")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = &r
	return nil
}

func (l *losableLock) RecordEvent(string) {}
func (l *losableLock) Identity() string   { return "me" }
func (l *losableLock) Describe() string   { return "ns/lock" }

// When the leader election is lost, controller-runtime skips its grace
// period (GracefulShutdownTimeout becomes 0) and returns at once, for the
// binary to exit before another replica leads; so does the broadcasters'
// bound: ShutdownTimeout, not the 30 s of a graceful stop, while the API
// server (the usual cause of the loss) does not answer. The loss itself
// is seen within RenewDeadline and a RetryPeriod.
func TestLostLeaderElectionSkipsTheGracefulShutdownBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lock := &losableLock{}
		lease, renew, retry := 2*time.Second, time.Second, 200*time.Millisecond
		m, f := newTestManager(t, manager.Options{
			LeaderElection: true, LeaderElectionID: "lock", LeaderElectionResourceLockInterface: lock,
			LeaseDuration: &lease, RenewDeadline: &renew, RetryPeriod: &retry,
		})
		release := make(chan struct{})
		defer close(release)
		f.events.Hold = func(apitest.Call[*eventsv1.Event]) <-chan struct{} { return release } // the API server is gone
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { done <- m.Start(ctx) }()
		<-m.Elected()
		m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "m")
		lock.lose.Store(true)
		lost := time.Now()
		err := <-done
		assert.ErrorContains(t, err, "leader election lost")
		took := time.Since(lost)
		assert.LessOrEqual(t, took, renew+retry+ShutdownTimeout, "Start returned %v after the leader election was lost", took)
	})
}

// A runnable that fails stops the manager without Start's context ending:
// controller-runtime then spends its GracefulShutdownTimeout (30 s by
// default) waiting for the other runnables, and the broadcasters' bound is
// what is left of it, counted from the failure: ShutdownTimeout here, not
// another 30 s.
func TestRunnableErrorStopBoundIsWhatIsLeftOfTheGracefulTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t, manager.Options{})
		release := make(chan struct{})
		defer close(release)
		f.events.Hold = func(apitest.Call[*eventsv1.Event]) <-chan struct{} { return release }
		fail := make(chan struct{})
		require.NoError(t, m.Add(manager.RunnableFunc(func(context.Context) error {
			<-fail
			return errors.New("runnable failed")
		})))
		require.NoError(t, m.Add(manager.RunnableFunc(func(context.Context) error {
			<-release // ignores its context: the manager waits its grace period
			return nil
		})))
		done := make(chan error, 1)
		go func() { done <- m.Start(context.Background()) }()
		<-m.Elected()
		m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "m")
		close(fail)
		failed := time.Now()
		err := <-done
		assert.ErrorContains(t, err, "runnable failed")
		took := time.Since(failed)
		assert.LessOrEqual(t, took, DefaultGracefulShutdownTimeout+ShutdownTimeout, "Start returned %v after the runnable failed", took)
	})
}

// slowAbortSink is an events.k8s.io sink whose writes never get an answer
// and, like an HTTP request whose connection is being torn down, return a
// little after their context is cancelled.
type slowAbortSink struct{}

func (slowAbortSink) wait(ctx context.Context) (*eventsv1.Event, error) {
	<-ctx.Done()
	time.Sleep(100 * time.Millisecond)
	return nil, ctx.Err()
}
func (s slowAbortSink) Create(ctx context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	return s.wait(ctx)
}
func (s slowAbortSink) Update(ctx context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	return s.wait(ctx)
}
func (s slowAbortSink) Patch(ctx context.Context, _ *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.wait(ctx)
}

// When Start returns, the events.k8s.io sink and its maintenance have
// ended, as the core/v1 sink has, and an event whose write the bound cut
// short is counted as dropped at shutdown: the Stats read then are final.
func TestEventsSinkEndedWhenStartReturnsAfterTheBound(t *testing.T) {
	m, err := NewManager(offline, manager.Options{Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"}},
		withSinks(apitest.NewCoreSink(), slowAbortSink{}), WithShutdownTimeout(200*time.Millisecond))
	require.NoError(t, err)
	stop := run(t, m)
	m.GetEventRecorder("pods").Eventf(pod("web"), nil, corev1.EventTypeNormal, "R", "A", "m")
	require.Eventually(t, func() bool { return m.EventsBroadcaster().Stats().Queued == 0 }, 5*time.Second, time.Millisecond, "the write is in flight")
	require.NoError(t, stop())
	st := m.EventsBroadcaster().Stats()
	assert.Zero(t, st.Sinks, "the events.k8s.io sink still runs after Start returned: %+v", st)
	assert.EqualValues(t, 1, st.DroppedShutdown, "the write in flight counted as dropped at shutdown when Start returns: %+v", st)
}
