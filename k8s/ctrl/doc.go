// Package fanoutctrl gives a controller-runtime manager fanout's event
// recorders, for both event APIs, leader election included, in one line:
//
//	mgr, err := ctrl.NewManager(cfg, options)            // before
//	mgr, err := fanoutctrl.NewManager(cfg, options)      // after
//
// The returned [*Manager] is a controller-runtime manager.Manager:
// builders, controllers and webhooks take it as before. What changes is
// where events go:
//
//   - mgr.GetEventRecorderFor(name) (core/v1 Events, deprecated by
//     controller-runtime) records through a
//     [github.com/fanout-go/fanout/k8s/record.Broadcaster], and
//     mgr.GetEventRecorder(name) (events.k8s.io/v1) through a
//     [github.com/fanout-go/fanout/k8s/events.Broadcaster]: client-go's
//     decisions (names, aggregation, series, patches, retries), every drop
//     counted by cause, no goroutine per event, a bounded series cache.
//   - With LeaderElection, the leader election records through the same
//     core/v1 broadcaster. controller-runtime's manager and cluster each
//     have a recorder provider; given one broadcaster through the
//     deprecated manager.Options.EventBroadcaster, each starts a sink on it
//     and every event is written twice (controller-runtime#1576). Here
//     neither provider is given an event: each event is written once.
//   - When the manager stops, after its runnables and the leader election
//     (whose "stopped leading" event is recorded last), [Manager.Start]
//     flushes both broadcasters and shuts them down within what is left of
//     the manager's GracefulShutdownTimeout (30 s unless set, counted
//     from the start of the stop; at least 5 s, and just that after a
//     lost leader election, whose grace period controller-runtime skips;
//     [WithShutdownTimeout] sets another bound; the flush, with retries,
//     has half of it, the last attempts the rest).
//     controller-runtime never waits for its broadcasters. The
//     events.k8s.io series still open get their final count written, so
//     that a clean stop drops nothing while the backlog fits the bound:
//     each sink writes up to 32 events at once
//     ([github.com/fanout-go/fanout/k8s/record.WithWriters]), so a burst of
//     a thousand takes a second or two on a local API server.
//   - [WithMetrics] registers the counters
//     ([github.com/fanout-go/fanout/k8s/metrics]) with controller-runtime's
//     metrics registry, served by the manager's metrics server:
//     fanout_k8s_events_dropped_total{api="events.k8s.io/v1",reason="queue_full"}, ...
//   - [WithDebugView] serves the live view of both broadcasters
//     ([github.com/fanout-go/fanout/debug]) on the manager's metrics
//     server, at /debug/fanout.
//
// # Goroutines
//
// NewManager starts none. The sinks start with the first event recorded
// or at [Manager.Start], whichever comes first: three goroutines (the
// core/v1 sink; the events.k8s.io sink and its series maintenance), and
// two more, the loggers, when the manager's logger shows V(1), as
// controller-runtime logs every event there. All of them have ended when
// Start returns, and the broadcasters' Stats are final: a write still in
// flight at the shutdown bound is cancelled (the core/v1 sink the manager
// makes writes with a context, where client-go's EventSinkImpl writes with
// context.Background()) and waited for, and a
// second Start returns controller-runtime's error without touching them. A manager that records events but is never started keeps
// its sinks running, as controller-runtime's does.
//
// When it stops, controller-runtime's manager still makes and shuts down
// the client-go broadcasters of its two recorder providers, unused; their
// goroutines end shortly after Start returns.
//
// # Versions
//
// This module requires controller-runtime v0.25 (which deprecates
// GetEventRecorderFor and adds GetEventRecorder) and client-go v0.37.
package fanoutctrl
