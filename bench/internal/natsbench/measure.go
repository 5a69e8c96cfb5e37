package natsbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// subject is where the producer publishes.
const subject = "bench.values"

// value is the payload: {"src":0,"seq":N}, decoded by every watcher; T is
// the send time of the latency measurement (ns since its start).
type value struct {
	Src int   `json:"src"`
	Seq int   `json:"seq"`
	T   int64 `json:"t,omitempty"`
}

// localQueue is the queue length of fanout's local watchers.
const localQueue = 100

// doneGuard bounds the wait for the last deliveries: past it, what did not
// arrive is reported as lost instead of hanging the run.
const doneGuard = time.Minute

// system is one way of delivering every value to every watcher.
type system struct {
	name, api   string
	subs, n     int // subscriber connections, watchers per connection
	deliveryPer int // deliveries per published value
	setup       func(srv *server.Server, m int, r *rig) error
	// produce publishes m values, paced (see publish); nil means publish.
	produce func(srv *server.Server, m, window int, r *rig) error
}

// rig is one measurement's consumers: counters the producer paces on, a
// channel they signal progress on, and what to tear down.
type rig struct {
	counts   []*atomic.Int64 // the values seen by each watcher
	progress []*atomic.Int64 // the counts the producer paces on
	notify   chan struct{}
	done     sync.WaitGroup // one per watcher, done after m values
	closers  []func()
	conns    []*nats.Conn // every connection, flushed before the server's counters are read
}

// counter returns a new watcher's count, which the producer paces on if
// paced is set.
func (r *rig) counter(paced bool) *atomic.Int64 {
	c := new(atomic.Int64)
	r.counts = append(r.counts, c)
	if paced {
		r.progress = append(r.progress, c)
	}
	return c
}

func (r *rig) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *rig) minProgress() int64 {
	low := int64(math.MaxInt64)
	for _, c := range r.progress {
		low = min(low, c.Load())
	}
	return low
}

func (r *rig) teardown() {
	for _, f := range slices.Backward(r.closers) {
		f()
	}
}

func connect(srv *server.Server, r *rig) (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, nc.Close)
	r.conns = append(r.conns, nc)
	return nc, nil
}

// settle makes the server's message counters whole. The server adds a read's
// messages to its counters only after it has delivered them, so a watcher can
// hold a value the counters do not show yet; a round trip on every connection
// is read after that read, so its reply comes after the counters are updated.
func (r *rig) settle() error {
	for _, nc := range r.conns {
		if err := nc.FlushTimeout(doneGuard); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("settling the server's counters: %w", err)
		}
	}
	return nil
}

func fanoutSystem(subs, n int) system {
	return system{name: SystemFanout, api: "Subscriber → Broadcaster, Recv", subs: subs, n: n, deliveryPer: subs * n,
		setup: fanoutSubscribers(subs, n)}
}

// framedSystem is fanoutSystem with a producer that publishes into a local
// broadcaster forwarded in frames of up to frame values.
func framedSystem(subs, n, frame int) system {
	return system{name: SystemFramed, api: fmt.Sprintf("Forward (frames ≤ %d) → Subscriber → Broadcaster, Recv", frame),
		subs: subs, n: n, deliveryPer: subs * n, setup: fanoutSubscribers(subs, n),
		produce: func(srv *server.Server, m, window int, r *rig) error {
			return forwardPaced(srv, m, window, frame, r)
		}}
}

func fanoutSubscribers(subs, n int) func(srv *server.Server, m int, r *rig) error {
	return func(srv *server.Server, m int, r *rig) error {
		for range subs {
			if err := fanoutSubscriber(srv, n, m, r); err != nil {
				return err
			}
		}
		return nil
	}
}

// forwardPaced publishes m values into a broadcaster whose Forwarder sends
// them in frames, never more than window ahead of the slowest paced
// consumer, and closes the forwarder once they are all published.
func forwardPaced(srv *server.Server, m, window, frame int, r *rig) error {
	nc, err := connect(srv, r)
	if err != nil {
		return err
	}
	out := fanout.New[value](fanout.WithQueueLength(1024))
	defer out.Shutdown()
	fwd, err := fanoutnats.Forward(out, nc, fanoutnats.ForwardConfig[value]{Subject: subject, Frame: frame})
	if err != nil {
		return err
	}
	for i := range m {
		if i%64 == 0 {
			if err := r.waitFor(int64(i-window), nc); err != nil {
				_ = fwd.Close(context.Background())
				return err
			}
		}
		if err := out.Action(value{Seq: i}); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), doneGuard)
	defer cancel()
	return fwd.Close(ctx)
}

// fanoutSubscriber is one process: one connection, one Subscriber, a
// broadcaster with n watchers, each counting until it has m values.
func fanoutSubscriber(srv *server.Server, n, m int, r *rig) error {
	return subscriberProcess(srv, n, r, func(i int, w *fanout.Watcher[value]) {
		// One watcher per process is paced on: the broadcaster waits for
		// the others, which are at most a queue behind.
		count := r.counter(i == 0)
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			buf := make([]value, localQueue)
			for count.Load() < int64(m) {
				k, err := w.Recv(context.Background(), buf)
				if err != nil {
					return
				}
				count.Add(int64(k))
				if i == 0 {
					r.signal()
				}
			}
		}()
	})
}

// subscriberProcess is one process: one connection, and a Subscriber into
// a broadcaster (queue localQueue) with n watchers, each handed to read
// (which starts its reader) before the subscription starts. Everything is
// closed with the rig.
func subscriberProcess(srv *server.Server, n int, r *rig, read func(i int, w *fanout.Watcher[value])) error {
	nc, err := connect(srv, r)
	if err != nil {
		return err
	}
	b := fanout.New[value](fanout.WithQueueLength(localQueue))
	r.closers = append(r.closers, b.Shutdown)
	for i := range n {
		w, err := b.Watch()
		if err != nil {
			return err
		}
		read(i, w)
	}
	s, err := fanoutnats.Subscribe(nc, b, fanoutnats.SubscribeConfig[value]{Subject: subject})
	if err != nil {
		return err
	}
	r.closers = append(r.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Close(ctx)
		<-s.Done()
	})
	return nil
}

func natsSystem(subs, n int) system {
	return system{name: SystemNATS, api: "a NATS subscription per watcher", subs: subs, n: n, deliveryPer: subs * n,
		setup: func(srv *server.Server, m int, r *rig) error {
			for range subs {
				nc, err := connect(srv, r)
				if err != nil {
					return err
				}
				for range n {
					if err := natsWatcher(nc, m, r, true); err != nil {
						return err
					}
				}
				if err := nc.Flush(); err != nil {
					return err
				}
			}
			return nil
		}}
}

// natsWatcher subscribes one watcher, which decodes every message (when
// decode is set) and counts it.
func natsWatcher(nc *nats.Conn, m int, r *rig, decode bool) error {
	progress := r.counter(true)
	r.done.Add(1)
	var once sync.Once
	sub, err := nc.Subscribe(subject, func(msg *nats.Msg) {
		if decode {
			var v value
			if json.Unmarshal(msg.Data, &v) != nil {
				return
			}
		}
		if progress.Add(1) == int64(m) {
			once.Do(r.done.Done)
		}
		r.signal()
	})
	if err != nil {
		return err
	}
	// Unlimited: the producer's window bounds what waits, and a dropped
	// message would make the comparison meaningless.
	return sub.SetPendingLimits(-1, -1)
}

func rawSystem() system {
	return system{name: SystemRaw, api: "1 subscription, no decoding", subs: 1, n: 1, deliveryPer: 1,
		setup: func(srv *server.Server, m int, r *rig) error {
			nc, err := connect(srv, r)
			if err != nil {
				return err
			}
			if err := natsWatcher(nc, m, r, false); err != nil {
				return err
			}
			return nc.Flush()
		}}
}

// sample is one measurement.
type sample struct {
	elapsed     time.Duration
	published   int
	delivered   int64
	networkMsgs int64
}

// measure builds the system, publishes m values with pacing and waits until
// every watcher has them.
func (s system) measure(srv *server.Server, m, window int) (sample, error) {
	r := &rig{notify: make(chan struct{}, 1)}
	defer r.teardown()
	if err := s.setup(srv, m, r); err != nil {
		return sample{}, err
	}
	nc, err := connect(srv, r)
	if err != nil {
		return sample{}, err
	}
	before, err := srv.Varz(nil)
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	produce := s.produce
	if produce == nil {
		produce = func(_ *server.Server, m, window int, r *rig) error { return publish(nc, m, window, r) }
	}
	if err := produce(srv, m, window, r); err != nil {
		return sample{}, err
	}
	finished := make(chan struct{})
	go func() { r.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(doneGuard):
	}
	elapsed := time.Since(start)
	if err := r.settle(); err != nil {
		return sample{}, err
	}
	after, err := srv.Varz(nil)
	if err != nil {
		return sample{}, err
	}
	var delivered int64
	for _, c := range r.counts {
		delivered += min(c.Load(), int64(m))
	}
	net := (after.InMsgs - before.InMsgs) + (after.OutMsgs - before.OutMsgs)
	return sample{elapsed: elapsed, published: m, delivered: delivered, networkMsgs: net}, nil
}

// publish sends m values, never more than window ahead of the slowest
// paced consumer.
func publish(nc *nats.Conn, m, window int, r *rig) error {
	buf := make([]byte, 0, 64)
	for i := range m {
		if i%64 == 0 {
			if err := r.waitFor(int64(i-window), nc); err != nil {
				return err
			}
		}
		buf = strconv.AppendInt(append(buf[:0], `{"src":0,"seq":`...), int64(i), 10)
		buf = append(buf, '}')
		if err := nc.Publish(subject, buf); err != nil {
			return err
		}
	}
	return nc.Flush()
}

// waitFor waits until every paced consumer has seen want values.
func (r *rig) waitFor(want int64, nc *nats.Conn) error {
	if want <= 0 {
		return nil
	}
	deadline := time.Now().Add(doneGuard)
	flushed := false
	for r.minProgress() < want {
		if !flushed { // the values behind the window may still sit in the client's buffer
			if err := nc.Flush(); err != nil {
				return err
			}
			flushed = true
		}
		select {
		case <-r.notify:
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("natsbench: consumers stopped progressing")
		}
	}
	return nil
}

func startServer() (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{DontListen: true, NoLog: true, NoSigs: true, ServerName: "natsbench"})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsbench: server not ready")
	}
	return srv, nil
}
