// Package demo is the program the observability tests look at: a few
// broadcasters, a recorder and a Kubernetes event broadcaster in the
// states that the dashboards, the alerting rules and the live view are
// made to show, served over HTTP as a real program serves them
// (/metrics, and the live view at /debug/fanout).
//
// What it holds, and what each part shows:
//
//   - "orders": a publisher stuck in Action, waiting for the watcher
//     "stalled" (WaitIfChannelFull, queue 4, never read): who holds a
//     publisher back. Its counts do not move.
//   - "clicks": a value published every [Tick] with ActionOrDrop; the
//     watcher "reader" takes them all, "evens" takes the even ones (its
//     filter rejects the others), and "lossy" (DropIfChannelFull, queue 8,
//     never read) drops them, and its drop handler panics each time: drops
//     and recovered panics that go on.
//   - "audit": a recorder that records a value every 4 Ticks, whose sink
//     fails every write (two tries each): failures, retries, values given
//     up on.
//   - "events": a k8s/record broadcaster that records an event every 10
//     Ticks (each about another pod, so that none is spam), whose sink
//     fails every write: write failures and events dropped after their
//     retries.
//
// Every goroutine it starts ends in [Program.Close].
package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/debug"
	k8smetrics "github.com/fanout-go/fanout/k8s/metrics"
	"github.com/fanout-go/fanout/k8s/record"
	"github.com/fanout-go/fanout/metrics"
)

// Tick is how often the program publishes, records and records an event.
const Tick = 5 * time.Millisecond

// StalledQueue is the queue length of "orders" and its watcher "stalled".
const StalledQueue = 4

// Program is the running program. Its fields are what it serves.
type Program struct {
	// Addr is the host:port of its HTTP server: /metrics and
	// /debug/fanout.
	Addr string
	// Orders and Stalled are the broadcaster whose publisher waits and
	// the watcher it waits for; Clicks the broadcaster published to all
	// the time; Audit the recorder; Events the Kubernetes broadcaster.
	Orders  *fanout.Broadcaster[int]
	Stalled *fanout.Watcher[int]
	Clicks  *fanout.Broadcaster[int]
	Audit   *fanout.Recorder[int]
	Events  *record.Broadcaster
	// View is the live view it serves.
	View *debug.Handler

	srv  *http.Server
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Start starts the program on a loopback port.
func Start() (*Program, error) {
	p := &Program{}
	if err := p.build(); err != nil {
		p.shutdown()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.shutdown()
		return nil, err
	}
	p.Addr = l.Addr().String()
	p.srv = &http.Server{Handler: p.mux(), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Go(func() { _ = p.srv.Serve(l) })
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.wg.Go(func() { p.run(ctx) })
	return p, nil
}

// build makes the broadcasters, the recorder and their watchers and
// runners, and stalls the publisher of "orders".
func (p *Program) build() error {
	var err error
	p.Orders = fanout.New[int](fanout.WithQueueLength(StalledQueue))
	if p.Stalled, err = p.Orders.Watch(fanout.WithName("stalled")); err != nil {
		return err
	}
	for i := range StalledQueue {
		if err := p.Orders.Action(i); err != nil {
			return err
		}
	}
	p.wg.Go(func() { _ = p.Orders.Action(StalledQueue) }) // waits for "stalled" until Close
	for len(p.Orders.Snapshot().Waiting) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := p.buildClicks(); err != nil {
		return err
	}
	p.Audit, err = fanout.NewRecorder[int](fanout.WithRetry(fanout.RetryPolicy{MaxTries: 2, Sleep: time.Millisecond}))
	if err != nil {
		return err
	}
	if _, err := p.Audit.StartSink(failingSink{}, nil); err != nil {
		return err
	}
	quiet := logr.NewContext(context.Background(), logr.Discard()) // its failures would fill the test's log
	p.Events = record.New(record.WithSleepDuration(time.Millisecond), record.WithContext(quiet))
	p.Events.StartRecordingToSink(failingEventSink{})
	return p.buildView()
}

// buildClicks makes "clicks" and its watchers, and starts the readers of
// "reader" and "evens".
func (p *Program) buildClicks() error {
	p.Clicks = fanout.New[int](fanout.WithQueueLength(8))
	if _, err := p.Clicks.Watch(fanout.WithName("lossy"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull),
		fanout.WithDropHandler(func(fanout.Drop) { panic("the drop handler of lossy fails") })); err != nil {
		return err
	}
	for _, o := range [][]fanout.Option{{fanout.WithName("reader")},
		{fanout.WithName("evens"), fanout.WithFilter(func(v int) bool { return v%2 == 0 })}} {
		w, err := p.Clicks.Watch(o...)
		if err != nil {
			return err
		}
		p.wg.Go(func() {
			buf := make([]int, 16)
			for {
				if _, err := w.Recv(context.Background(), buf); err != nil {
					return
				}
			}
		})
	}
	return nil
}

// buildView makes the live view of everything.
func (p *Program) buildView() error {
	h, err := debug.New()
	if err != nil {
		return err
	}
	h.Register(debug.Broadcaster("orders", p.Orders))
	h.Register(debug.Broadcaster("clicks", p.Clicks))
	h.Register(debug.Recorder("audit", p.Audit))
	h.Register(debug.Recorder("events", p.Events))
	p.View = h
	return nil
}

// mux serves /metrics and the live view.
func (p *Program) mux() *http.ServeMux {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(p.Orders, prometheus.Labels{"broadcaster": "orders"}),
		metrics.NewCollector(p.Clicks, prometheus.Labels{"broadcaster": "clicks"}),
		metrics.NewCollector(p.Audit, prometheus.Labels{"broadcaster": "audit"}),
		k8smetrics.NewCollector(p.Events, prometheus.Labels{"api": "core/v1"}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/fanout", p.View)
	return mux
}

// run publishes, records and records an event every Tick until ctx ends.
func (p *Program) run(ctx context.Context) {
	rec := p.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "demo"})
	t := time.NewTicker(Tick)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, _ = p.Clicks.ActionOrDrop(i)
		if i%4 == 0 { // its failing writes take a few ms: slow enough that its queue never fills
			_ = p.Audit.Record(i)
		}
		if i%10 == 0 { // each is tried 12 times
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: fmt.Sprintf("web-%d", i)}}
			rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "restarting %s", pod.Name)
		}
	}
}

// Close stops the program and waits for every goroutine it started.
func (p *Program) Close() {
	if p.stop != nil {
		p.stop()
	}
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.srv.Shutdown(ctx)
	}
	p.shutdown()
	p.wg.Wait()
}

// shutdown shuts down what build made.
func (p *Program) shutdown() {
	for _, b := range []interface{ Shutdown() }{p.Orders, p.Clicks} {
		if b != nil && b != (*fanout.Broadcaster[int])(nil) {
			b.Shutdown()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p.Audit != nil {
		_ = p.Audit.Shutdown(ctx)
	}
	if p.Events != nil {
		_ = p.Events.ShutdownContext(ctx)
	}
}

// errDown is what the failing sinks return.
var errDown = errors.New("demo: the sink's endpoint is down")

// failingSink fails every write.
type failingSink struct{}

func (failingSink) Create(context.Context, int) (int, error) { return 0, errDown }
func (failingSink) Update(context.Context, int) (int, error) { return 0, errDown }

// failingEventSink is a Kubernetes event sink that fails every write.
type failingEventSink struct{}

func (failingEventSink) Create(*corev1.Event) (*corev1.Event, error)        { return nil, errDown }
func (failingEventSink) Update(*corev1.Event) (*corev1.Event, error)        { return nil, errDown }
func (failingEventSink) Patch(*corev1.Event, []byte) (*corev1.Event, error) { return nil, errDown }
