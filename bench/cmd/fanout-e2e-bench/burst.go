package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/record"
)

// system is one recorder measured: an API, client-go's or fanout's, and
// fanout's number of writers.
type system struct {
	api     string // "core/v1" or "events.k8s.io/v1"
	fanout  bool
	writers int
}

func (s system) label() string {
	if !s.fanout {
		return s.api + " client-go"
	}
	return fmt.Sprintf("%s fanout, %d writer%s", s.api, s.writers, map[bool]string{true: "", false: "s"}[s.writers == 1])
}

// systems returns client-go and fanout with each of writers, per API.
func systems(writers []int) []system {
	var out []system
	for _, api := range []string{"core/v1", "events.k8s.io/v1"} {
		out = append(out, system{api: api})
		for _, n := range writers {
			out = append(out, system{api: api, fanout: true, writers: n})
		}
	}
	return out
}

// recorder records one event about pod with reason; stop shuts it down.
type recorder struct {
	record func(pod *v1.Pod, reason string)
	stop   func()
}

// newRecorder starts the broadcaster of s writing to client.
func newRecorder(ctx context.Context, s system, client kubernetes.Interface, queue int) (recorder, error) {
	if s.api == "core/v1" {
		return newCoreRecorder(s, client, queue)
	}
	sink := &clientevents.EventSinkImpl{Interface: client.EventsV1()}
	var b clientevents.EventBroadcaster = clientevents.NewBroadcaster(sink)
	if s.fanout {
		fb, err := events.New(&events.EventSinkImpl{Interface: client.EventsV1()},
			events.WithWriters(s.writers), events.WithQueueLength(queue))
		if err != nil {
			return recorder{}, err
		}
		b = fb
	}
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return recorder{}, err
	}
	r := b.NewRecorder(scheme.Scheme, "fanout-e2e-bench")
	return recorder{
		record: func(p *v1.Pod, reason string) { r.Eventf(p, nil, v1.EventTypeNormal, reason, "Burst", "a burst") },
		stop:   b.Shutdown,
	}, nil
}

func newCoreRecorder(s system, client kubernetes.Interface, queue int) (recorder, error) {
	var b clientrecord.EventBroadcaster = clientrecord.NewBroadcaster()
	if s.fanout {
		fb, err := record.NewChecked(record.WithWriters(s.writers), record.WithQueueLength(queue))
		if err != nil {
			return recorder{}, err
		}
		b = fb
	}
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	r := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "fanout-e2e-bench"})
	return recorder{
		record: func(p *v1.Pod, reason string) { r.Event(p, v1.EventTypeNormal, reason, "a burst") },
		stop:   b.Shutdown,
	}, nil
}

// measure runs o.reps bursts of s, each in a namespace of its own, and
// returns the median.
func measure(ctx context.Context, env *apiservertest.Env, s system, o options) (result, error) {
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 1e6, 1e6 // the client's own rate limit is not what is measured
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return result{}, err
	}
	var rs []result
	for rep := range o.reps {
		ns := fmt.Sprintf("burst-%s-%d", strings.NewReplacer("/", "-", ".", "-", " ", "-", ",", "").Replace(s.label()), rep)
		r, err := burst(ctx, client, s, o, ns)
		if err != nil {
			return result{}, err
		}
		rs = append(rs, r)
	}
	return median(rs), nil
}

// burst records o.events events of s in namespace ns and waits for them
// on the server.
func burst(ctx context.Context, client kubernetes.Interface, s system, o options, ns string) (result, error) {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	on, stopWatch, err := watchCreates(ctx, client, s.api, ns)
	if err != nil {
		return result{}, err
	}
	defer stopWatch()
	rec, err := newRecorder(ctx, s, client, o.queue)
	if err != nil {
		return result{}, err
	}
	defer rec.stop()
	pods := make([]*v1.Pod, o.objects)
	for i := range pods {
		pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: ns, UID: types.UID(fmt.Sprint(ns, "-", i))}}
	}
	start := time.Now()
	for i := range o.events {
		rec.record(pods[i%o.objects], fmt.Sprint("Reason", i/o.objects))
	}
	last := time.Now()
	n, at := on.waitFor(int64(o.events), o.wait)
	r := result{API: s.api, System: map[bool]string{true: "fanout", false: "client-go"}[s.fanout], Events: o.events,
		Wall: at.Sub(start), After: max(at.Sub(last), 0), Lost: o.events - int(n), Recorded: last.Sub(start)}
	if s.fanout {
		r.Writers = s.writers
	}
	r.PerSec = float64(n) / r.Wall.Seconds()
	return r, nil
}

// creates counts the events the API server holds, as its watch tells.
type creates struct {
	n    atomic.Int64
	last atomic.Int64 // unix nanos of the latest
	done chan struct{}
}

// waitFor waits until n events are on the server or wait passes, and
// returns how many are and when the last of them arrived.
func (c *creates) waitFor(n int64, wait time.Duration) (int64, time.Time) {
	deadline := time.Now().Add(wait)
	for c.n.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return c.n.Load(), time.Unix(0, c.last.Load())
}

// watchCreates watches the events of api in ns and counts those added.
func watchCreates(ctx context.Context, client kubernetes.Interface, api, ns string) (*creates, func(), error) {
	var w watch.Interface
	var err error
	if api == "core/v1" {
		w, err = client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	} else {
		w, err = client.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil, nil, err
	}
	c := &creates{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				c.last.Store(time.Now().UnixNano())
				c.n.Add(1)
			}
		}
	}()
	return c, func() { w.Stop(); <-c.done }, nil
}

func init() {
	// client-go's recorders log every write error; the report says what
	// was lost.
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(false)
}
