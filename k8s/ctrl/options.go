package fanoutctrl

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout/debug"
	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/record"
)

// ShutdownTimeout is the least time [Manager.Start] gives the flush and
// shutdown of both broadcasters once controller-runtime's manager has
// stopped, when what is left of the manager's GracefulShutdownTimeout is
// less (see [WithShutdownTimeout]). It is the adapters' own bound
// ([record.ShutdownTimeout], [events.ShutdownTimeout]).
const ShutdownTimeout = 5 * time.Second

// DefaultGracefulShutdownTimeout is controller-runtime's default
// manager.Options.GracefulShutdownTimeout, which bounds, by default, the
// manager's stop and the broadcasters' flush together (see
// [WithShutdownTimeout]).
const DefaultGracefulShutdownTimeout = 30 * time.Second

// Option tunes [NewManager]. Each option's doc gives its default. As
// everywhere in the repository (see "Configuration" in the core's package
// doc), an unset option takes its default and a value no setting can mean
// is an error that NewManager returns: a negative [WithShutdownTimeout], a
// bad option of [WithRecordOptions] or [WithEventsOptions].
type Option interface {
	apply(*config)
}

type config struct {
	shutdownTimeout time.Duration
	metrics         bool
	registerer      prometheus.Registerer
	view            *debugView
	recordOpts      []record.BroadcasterOption
	eventsOpts      []events.Option
	err             error // a bad option value: NewManager returns it

	// Sinks replacing the API server's, for this package's tests only.
	coreSink   record.EventSink
	eventsSink events.EventSink
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.shutdownTimeout < 0 {
		c.err = fmt.Errorf("fanoutctrl: WithShutdownTimeout(%v): the bound must be 0 (the default: what is left of the manager's GracefulShutdownTimeout) or more", c.shutdownTimeout)
	}
	return c
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithShutdownTimeout bounds the flush and shutdown of both broadcasters
// once controller-runtime's manager has stopped, d on top of the
// manager's GracefulShutdownTimeout. By default (or for zero; NewManager
// refuses a negative d) the bound follows controller-runtime's: what is
// left of the manager's GracefulShutdownTimeout ([DefaultGracefulShutdownTimeout],
// 30 s, unless set), counted from the start of the manager's stop (Start's
// context ended, or a runnable failed), after the runnables and the leader
// election stopped; after a lost leader election, none is left
// (controller-runtime skips its grace period then, and so does this bound,
// d too if more); never less than
// [ShutdownTimeout] (5 s), so that the events recorded last (the leader
// election's "stopped leading") get their attempt; no bound when the
// manager's is negative (controller-runtime waits for ever then). The
// flush, in which failed writes are retried as usual, takes at most half
// of the bound; the rest gives every event still queued its last attempt
// and the open series their final count. Events still unwritten when it
// ends are counted as dropped at shutdown, the core/v1 write in flight is
// cancelled, and [Manager.Start] logs that it ran out of time.
func WithShutdownTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.shutdownTimeout = d })
}

// WithMetrics registers the broadcasters' Prometheus collectors
// ([github.com/fanout-go/fanout/k8s/metrics.NewCollector]) with reg, or
// with controller-runtime's metrics registry
// (sigs.k8s.io/controller-runtime/pkg/metrics.Registry, the one its
// metrics server serves) when reg is nil (a typed nil pointer too). The metrics carry the label
// api="core/v1" (GetEventRecorderFor) or api="events.k8s.io/v1"
// (GetEventRecorder). They are unregistered when [Manager.Start] returns,
// so that another manager of the same process can register its own. The
// default is no metrics.
func WithMetrics(reg prometheus.Registerer) Option {
	return optionFunc(func(c *config) { c.metrics, c.registerer = true, reg })
}

// DefaultDebugViewPath is where [WithDebugView] serves the live view when
// given no path.
const DefaultDebugViewPath = "/debug/fanout"

// debugView is what WithDebugView asked for.
type debugView struct {
	path string
	h    *debug.Handler
}

// WithDebugView serves the live view of the manager's two broadcasters
// ([github.com/fanout-go/fanout/debug]: their sinks and queues, what they
// wrote, dropped and retried, who holds a recorder back) on the manager's
// metrics server, at path ([DefaultDebugViewPath] for ""), as an extra
// handler of that server: behind its authentication and TLS when it has
// them (manager.Options.Metrics's FilterProvider and SecureServing). The
// view shows names and counts, never an event's content.
//
// h is the view to serve, so that a program can show its own
// broadcasters beside the manager's (h.Register); nil makes one. The
// manager registers its broadcasters with h as the sections
// "events core/v1" (GetEventRecorderFor) and "events events.k8s.io/v1"
// (GetEventRecorder), and takes them off when [Manager.Start] returns.
// NewManager returns an error when the metrics server is off
// (manager.Options.Metrics.BindAddress "0") or path is taken. The default
// is no view.
func WithDebugView(path string, h *debug.Handler) Option {
	return optionFunc(func(c *config) {
		if path == "" {
			path = DefaultDebugViewPath
		}
		c.view = &debugView{path: path, h: h}
	})
}

// WithRecordOptions tunes the core/v1 broadcaster behind
// GetEventRecorderFor (correlator, queue length, pause between retries):
// see [record.New]. The default is client-go's settings. A
// [record.WithContext] among them replaces the manager's logger, and
// cancelling its context shuts the broadcaster down.
func WithRecordOptions(opts ...record.BroadcasterOption) Option {
	return optionFunc(func(c *config) { c.recordOpts = append(c.recordOpts, opts...) })
}

// WithEventsOptions tunes the events.k8s.io/v1 broadcaster behind
// GetEventRecorder (queue length, series cache, pause between retries):
// see [events.New]. The default is client-go's settings.
func WithEventsOptions(opts ...events.Option) Option {
	return optionFunc(func(c *config) { c.eventsOpts = append(c.eventsOpts, opts...) })
}
