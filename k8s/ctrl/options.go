package fanoutctrl

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/record"
)

// ShutdownTimeout is the default bound of what [Manager.Start] does after
// controller-runtime's manager has stopped: flush both broadcasters, then
// shut them down. It is the adapter's own bound ([record.ShutdownTimeout],
// [events.ShutdownTimeout]); see [WithShutdownTimeout].
const ShutdownTimeout = 5 * time.Second

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
		c.err = fmt.Errorf("fanoutctrl: WithShutdownTimeout(%v): the bound must be 0 (the default, %v) or more", c.shutdownTimeout, ShutdownTimeout)
	}
	if c.shutdownTimeout <= 0 {
		c.shutdownTimeout = ShutdownTimeout
	}
	return c
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithShutdownTimeout bounds the flush and shutdown of both broadcasters
// once controller-runtime's manager has stopped (default
// [ShutdownTimeout], 5 s, also for zero; NewManager refuses a negative
// d). It comes on top of the manager's GracefulShutdownTimeout. The flush,
// in which failed writes are retried as usual, takes at most half of it;
// the rest gives every event still queued its last attempt and the open
// series their final count. Events still unwritten when it ends are
// counted as dropped at shutdown, the core/v1 write in flight is
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
