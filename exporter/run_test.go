package exporter

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// runExporter runs Run in a goroutine; the returned stop cancels it and
// returns Run's error.
func runExporter(t *testing.T, opts Options) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, opts) }()
	var once bool
	var err error
	stop = func() error {
		if !once {
			once = true
			cancel()
			err = <-errc
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func sinkConfig(t *testing.T, s *memSink, ckFile string) *Config {
	c := testConfig(t, s)
	c.Checkpoint.File = ckFile
	c.Checkpoint.Interval = Duration(10 * time.Millisecond)
	return c
}

func TestRunResumesFromTheCheckpointWithNothingLostOrRepeated(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(coreEvent("a", 1), coreEvent("b", 2))
	ck := filepath.Join(t.TempDir(), "ck.json")

	first := &memSink{target: 2, reached: make(chan struct{})}
	stop := runExporter(t, Options{Config: sinkConfig(t, first, ck), Client: cs})
	<-first.reached
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := first.stored(); !sameSet(got, []string{"a/1", "b/2"}) {
		t.Fatalf("first run stored %v", got)
	}

	// While the exporter is down: a repeat of a, a new event c, b deleted.
	e, _ := cs.CoreV1().Events("ns").Get(ctx, "a", metav1.GetOptions{})
	e.Count = 3
	if _, err := cs.CoreV1().Events("ns").Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events("ns").Create(ctx, coreEvent("c", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Events("ns").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	second := &memSink{target: 2, reached: make(chan struct{})}
	stop = runExporter(t, Options{Config: sinkConfig(t, second, ck), Client: cs})
	<-second.reached
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := second.stored(); !sameSet(got, []string{"a/3", "c/1"}) {
		t.Errorf("second run stored %v, want exactly what was missed: a/3 and c/1", got)
	}
	saved, err := FileStore{Path: ck}.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// (Whether b has left it depends on whether the source had finished
	// its initial list when stopped; the source's tests cover that.)
	if saved.Counts["a"] != 3 || saved.Counts["c"] != 1 {
		t.Errorf("checkpoint counts %v, want a:3 and c:1", saved.Counts)
	}
}

func TestRunServesMetricsHealthAndReadiness(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &memSink{target: 1, reached: make(chan struct{})}
	runExporter(t, Options{Config: testConfig(t, s), Client: cs, Listener: l})
	<-s.reached
	base := "http://" + l.Addr().String()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	// The occurrence was forwarded during the initial list, which ends
	// with the source reporting itself synced.
	for code, _ := get(t, base+"/readyz"); code != 200; code, _ = get(t, base+"/readyz") {
		waitABit()
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		`fanout_eventer_sink_sent_total{sink="s0"} 1`,
		`fanout_eventer_sink_dropped_total{reason="queue_oldest",sink="s0"} 0`,
		`fanout_eventer_sink_queue_capacity{sink="s0"} 16`,
		`fanout_eventer_source_occurrences_total 1`,
		`fanout_eventer_source_watch_restarts_total 0`,
		`fanout_eventer_leader 1`,
		`fanout_eventer_source_lag_seconds_count 1`,
		`fanout_eventer_source_relists_total 0`,
		`fanout_eventer_source_collapsed_raises_total 0`,
		`fanout_eventer_build_info{goversion="` + runtime.Version() + `",version="(devel)"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestLeaderElectionLetsOneOfTwoReplicasExport(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	le := func(id string) *LeaderElection {
		return &LeaderElection{Namespace: "ns", Name: "lease", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	}
	one := &memSink{target: 1, reached: make(chan struct{})}
	m1 := NewMetrics()
	stop1 := runExporter(t, Options{Config: testConfig(t, one), Client: cs, LeaderElection: le("one"), Metrics: m1})
	<-one.reached
	two := &memSink{target: 1, reached: make(chan struct{})}
	stop2 := runExporter(t, Options{Config: testConfig(t, two), Client: cs, LeaderElection: le("two")})
	if err := stop1(); err != nil { // releases the Lease after its flush
		t.Fatal(err)
	}
	<-two.reached // the follower took over (no checkpoint: it exports a again)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if got := one.stored(); !slices.Equal(got, []string{"a/1"}) {
		t.Errorf("leader stored %v", got)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitABit yields while polling an HTTP endpoint, which offers nothing to
// synchronise on.
func waitABit() { time.Sleep(10 * time.Millisecond) }

func sameSet(got, want []string) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A replica that loses the Lease flushes its sinks, within the shutdown
// timeout, before Run returns ErrLeadershipLost (exit 1). client-go runs
// OnStartedLeading on its own goroutine and returns from its Run at the
// failed renewal: Run returned nil ("never led", exit 0) while the flush
// still ran, and its pipeline went on exporting.
func TestLosingTheLeaseFlushesBeforeRunReturnsLeadershipLost(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	var failLease atomic.Bool
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if failLease.Load() {
			return true, nil, errors.New("apiserver unreachable")
		}
		return false, nil, nil
	})
	s := &enteringSink{entered: make(chan string, 1), release: make(chan struct{})}
	c := testConfig(t, s)
	c.ShutdownTimeout = Duration(time.Second)
	le := &LeaderElection{Namespace: "ns", Name: "lease", Identity: "one",
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	errc := make(chan error, 1)
	go func() { errc <- Run(t.Context(), Options{Config: c, Client: cs, LeaderElection: le}) }()
	<-s.entered // leading; a/1 is being written
	failLease.Store(true)
	err := <-errc
	if s.returned.Load() == 0 {
		t.Error("Run returned while its sink's write was still running")
	}
	if !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("Run after losing the Lease: %v, want ErrLeadershipLost", err)
	}
	close(s.release)
}

// oldEvent returns coreEvent(uid, count) last seen age ago.
func oldEvent(uid string, count int32, age time.Duration) *corev1.Event {
	e := coreEvent(uid, count)
	e.FirstTimestamp = metav1.NewTime(time.Now().Add(-age))
	e.LastTimestamp = e.FirstTimestamp
	return e
}

// A first start without a checkpoint exports none of the events last
// seen longer than maxEventAgeSeconds ago, as kubernetes-event-exporter;
// the checkpoint it writes counts them, so a later count raise is
// exported and a restart exports none of them again.
func TestFirstStartWithoutCheckpointExportsNoEventOlderThanMaxEventAge(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(oldEvent("old", 3, 40*time.Minute), coreEvent("fresh", 1))
	ck := filepath.Join(t.TempDir(), "ck.json")
	s := &memSink{target: 1, reached: make(chan struct{})}
	c := sinkConfig(t, s, ck)
	c.maxEventAge = 5 * time.Minute
	m := NewMetrics()
	stop := runExporter(t, Options{Config: c, Client: cs, Metrics: m})
	<-s.reached
	for m.source.Load() == nil || !m.source.Load().Synced() {
		waitABit()
	}
	if st := m.source.Load().Stats(); st.TooOld != 1 {
		t.Errorf("TooOld %d, want 1 (the 40-minute-old event)", st.TooOld)
	}
	e, _ := cs.CoreV1().Events("ns").Get(ctx, "old", metav1.GetOptions{})
	e.Count, e.LastTimestamp = 4, metav1.Now()
	if _, err := cs.CoreV1().Events("ns").Update(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for len(s.stored()) < 2 {
		waitABit()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := s.stored(); !slices.Equal(got, []string{"fresh/1", "old/4"}) {
		t.Errorf("stored %v, want fresh/1 and the raise old/4, not old/3", got)
	}
	saved, err := FileStore{Path: ck}.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Counts["old"] != 4 || saved.Counts["fresh"] != 1 {
		t.Errorf("checkpoint counts %v, want old:4 and fresh:1", saved.Counts)
	}
}

// With a checkpoint that has a resource version, the checkpoint decides:
// an event it does not cover came after it, and is exported at a list (the
// API server no longer has that resource version), however old.
func TestWithACheckpointTheCheckpointDecidesNotTheAge(t *testing.T) {
	cs := fake.NewClientset(oldEvent("old", 1, 40*time.Minute))
	watchedFrom(cs, "1")
	ck := filepath.Join(t.TempDir(), "ck.json")
	saved := &Checkpoint{Version: checkpointVersion, ResourceVersion: "1", Counts: map[string]int32{"gone": 1}}
	if err := (FileStore{Path: ck}).Save(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
	s := &memSink{target: 1, reached: make(chan struct{})}
	c := sinkConfig(t, s, ck)
	c.maxEventAge = 5 * time.Minute
	stop := runExporter(t, Options{Config: c, Client: cs})
	<-s.reached
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := s.stored(); !slices.Equal(got, []string{"old/1"}) {
		t.Errorf("stored %v, want old/1", got)
	}
}

// A first start stopped before its sinks were done with its list writes a
// checkpoint with counts and no resource version: the restart resumes
// those counts, and cuts off the old events the first start had not
// reached, as that first start would have, rather than export them.
func TestARestartAfterAFirstStartStoppedDuringItsListExportsNoOldEvent(t *testing.T) {
	cs := fake.NewClientset(oldEvent("a-old", 1, 40*time.Minute),
		coreEvent("b1", 1), coreEvent("b2", 1), coreEvent("b3", 1), coreEvent("b4", 1),
		oldEvent("c-old", 1, 40*time.Minute))
	ck := filepath.Join(t.TempDir(), "ck.json")
	stopDuringTheList(t, cs, ck)

	s := &memSink{}
	c := sinkConfig(t, s, ck)
	c.maxEventAge = 5 * time.Minute
	m := NewMetrics()
	stop := runExporter(t, Options{Config: c, Client: cs, Metrics: m})
	for m.source.Load() == nil || !m.source.Load().Synced() {
		waitABit()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := s.stored(); !sameSet(got, []string{"b2/1", "b3/1", "b4/1"}) {
		t.Errorf("the restart stored %v, want b2, b3 and b4: not c-old, last seen 40 minutes ago", got)
	}
}

// stopDuringTheList runs a first start whose sink stores b1 and then
// stalls, and stops it once the checkpoint counts b1.
func stopDuringTheList(t *testing.T, cs *fake.Clientset, ck string) {
	t.Helper()
	s := &memSink{gate: make(chan struct{})}
	c := sinkConfig(t, s, ck)
	c.Receivers[0].Queue.Length, c.Receivers[0].Batch = 1, 1
	c.maxEventAge = 5 * time.Minute
	c.ShutdownTimeout = Duration(100 * time.Millisecond)
	stop := runExporter(t, Options{Config: c, Client: cs})
	s.gate <- struct{}{}
	for {
		saved, err := FileStore{Path: ck}.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if saved != nil && saved.Counts["b1"] == 1 {
			if saved.ResourceVersion != "" {
				t.Fatalf("checkpoint %+v: the list was done with", saved)
			}
			break
		}
		waitABit()
	}
	_ = stop() // the stalled sink could not write what it held: reported
}

// checkpoint.file in a directory not created yet (a fresh volume) is
// written: a clean stop leaves a checkpoint for the next start.
func TestRunWritesTheCheckpointInADirectoryNotYetCreated(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	ck := filepath.Join(t.TempDir(), "state", "ck.json")
	s := &memSink{target: 1, reached: make(chan struct{})}
	stop := runExporter(t, Options{Config: sinkConfig(t, s, ck), Client: cs})
	<-s.reached
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if saved, err := (FileStore{Path: ck}).Load(context.Background()); saved == nil || saved.Counts["a"] != 1 {
		t.Errorf("checkpoint %+v, %v after a clean stop: want a counted", saved, err)
	}
}

// An exporter that could never write its checkpoint file does not start
// (every restart would be a first start).
func TestRunDoesNotStartWhereTheCheckpointCannotBeWritten(t *testing.T) {
	// No directory can be made in /proc/self; a start would run for 1 s.
	c := sinkConfig(t, &memSink{}, "/proc/self/fanout-eventer/ck.json")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := Run(ctx, Options{Config: c, Client: fake.NewClientset()})
	if err == nil || !strings.Contains(err.Error(), "cannot be written") {
		t.Errorf("Run: %v, want the checkpoint that cannot be written", err)
	}
}

func TestMetricsNamePrefixAddsTheirMetricsBesideOurs(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &memSink{target: 1, reached: make(chan struct{})}
	c := testConfig(t, s)
	c.MetricsNamePrefix, c.keyLines = "event_exporter_", map[string]int{"metricsNamePrefix": 1}
	runExporter(t, Options{Config: c, Client: cs, Listener: l})
	<-s.reached
	base := "http://" + l.Addr().String()
	for code, _ := get(t, base+"/-/ready"); code != 200; code, _ = get(t, base+"/-/ready") {
		waitABit()
	}
	if code, _ := get(t, base+"/-/healthy"); code != 200 {
		t.Errorf("/-/healthy: %d", code)
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		"event_exporter_events_sent 1", "event_exporter_events_discarded 0", "event_exporter_watch_errors 0",
		"event_exporter_send_event_errors 0", "event_exporter_kube_api_read_cache_hits 0",
		"event_exporter_kube_api_read_cache_misses 0", `event_exporter_build_info{goarch="` + runtime.GOARCH + `"`,
		"fanout_eventer_source_occurrences_total 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A follower is ready only while it reads the Lease and sees another
// replica renew it: one that cannot read it (a Lease its Role does not
// grant) is not, since then no replica may be exporting.
func TestFollowerIsReadyOnlyWhileItSeesALiveLeader(t *testing.T) {
	cs := fake.NewClientset()
	leases := cs.CoordinationV1().Leases("ns")
	holder, dur := "other", int32(2)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur,
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := leases.Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var forbid atomic.Bool
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if forbid.Load() {
			return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "lease", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	renewing := make(chan struct{})
	t.Cleanup(func() { <-renewing })
	go func() { // the other replica renews its Lease, until the test ends
		defer close(renewing)
		for t.Context().Err() == nil {
			l, err := leases.Get(context.Background(), "lease", metav1.GetOptions{})
			if err == nil {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
				_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	le := &LeaderElection{Namespace: "ns", Name: "lease", Identity: "me",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond}
	stop := runExporter(t, Options{Config: testConfig(t, &memSink{}), Client: cs, Listener: l, LeaderElection: le})
	ready := "http://" + l.Addr().String() + "/readyz"
	for code, _ := get(t, ready); code != 200; code, _ = get(t, ready) {
		waitABit()
	}
	forbid.Store(true)
	code, body := get(t, ready)
	for ; code == 200; code, body = get(t, ready) {
		waitABit()
	}
	if code != 503 || !strings.Contains(body, "standing by: the Lease cannot be read") {
		t.Errorf("/readyz %d %q, want 503: the Lease cannot be read", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
