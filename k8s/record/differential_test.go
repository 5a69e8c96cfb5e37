package record_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// lines collects log lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }
func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) { l.add(prefix + " " + args) }, funcr.Options{Verbosity: 10})
}

// side is one broadcaster under test, client-go's or ours, with a sink and
// two loggers.
type side struct {
	b          clientrecord.EventBroadcaster
	sink       *apitest.CoreSink
	logf       lines
	structured lines
	recorders  []clientrecord.EventRecorder
}

func newSide(ctx context.Context, newBroadcaster func(...any) clientrecord.EventBroadcaster, opts clientrecord.CorrelatorOptions) *side {
	s := &side{sink: apitest.NewCoreSink()}
	s.b = newBroadcaster(klog.NewContext(ctx, s.structured.logger()), opts)
	s.b.StartRecordingToSink(s.sink)
	s.b.StartLogging(func(format string, args ...any) { s.logf.add(fmt.Sprintf(format, args...)) })
	s.b.StartStructuredLogging(0)
	for _, src := range []v1.EventSource{{Component: "ctl", Host: "h1"}, {Component: "other"}} {
		s.recorders = append(s.recorders, s.b.NewRecorder(scheme.Scheme, src))
	}
	return s
}

func clientGo(ctx any, opts any) clientrecord.EventBroadcaster {
	return clientrecord.NewBroadcaster(clientrecord.WithContext(ctx.(context.Context)),
		clientrecord.WithCorrelatorOptions(opts.(clientrecord.CorrelatorOptions)))
}

func ours(ctx any, opts any) clientrecord.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx.(context.Context)),
		record.WithCorrelatorOptions(opts.(clientrecord.CorrelatorOptions)))
}

// step is one recorded event: which recorder, about which object, what.
type step struct {
	recorder  int
	obj       runtime.Object
	eventType string
	reason    string
	message   string
	wait      time.Duration
	lose      bool // the server loses every stored event first (a 404 on the next patch)
}

// script returns about n random steps. Where client-go's decision depends
// on map order (a message seen again in a group that has passed the
// aggregation threshold: which message client-go forgot there is random),
// the two cannot be compared, so the scripts avoid that case: plain steps
// use fewer distinct messages per group than the threshold (distinct), and
// bursts, which pass it, use a reason of their own and never repeat a
// message.
func script(rng *rand.Rand, n, distinct int) []step {
	objs := []runtime.Object{pod("a"), pod("b"), &v1.Node{}}
	objs[2].(*v1.Node).Name = "n1"
	reasons := []string{"Pulled", "Started"}
	bursts := 0
	var steps []step
	for len(steps) < n {
		s := step{
			recorder:  rng.IntN(2),
			obj:       objs[rng.IntN(len(objs))],
			eventType: []string{v1.EventTypeNormal, v1.EventTypeWarning}[rng.IntN(2)],
			reason:    reasons[rng.IntN(len(reasons))],
			message:   fmt.Sprintf("message %d", rng.IntN(distinct)),
			wait:      time.Duration(rng.IntN(4)) * time.Second,
			lose:      rng.IntN(60) == 0,
		}
		switch rng.IntN(100) {
		case 0, 1:
			s.wait = 11 * time.Minute // past the aggregation window; refills
		case 2, 3, 4, 5:
			// A burst about one object: similar messages (aggregation) and
			// more than the spam budget.
			for range 12 + rng.IntN(20) {
				b := s
				b.reason = "BackOff"
				b.message = fmt.Sprintf("burst %d", bursts)
				bursts++
				b.wait = 0
				steps = append(steps, b)
			}
		}
		steps = append(steps, s)
	}
	return steps
}

// TestDifferentialClientGo runs client-go's broadcaster and ours on the same
// random scripts, in one bubble so that both read the same fake time, and
// compares every sink call (operation, the whole event, the patch bytes) and
// every log line.
func TestDifferentialClientGo(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			opts, distinct := clientrecord.CorrelatorOptions{}, 9
			if seed%2 == 1 {
				// Small caches, a tight spam budget and quick aggregation.
				opts = clientrecord.CorrelatorOptions{LRUCacheSize: 3, BurstSize: 4, QPS: 0.01, MaxEvents: 3, MaxIntervalInSeconds: 120}
				distinct = 2
			}
			steps := script(rand.New(rand.NewPCG(seed, 7)), 400, distinct)
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				c := newSide(ctx, func(a ...any) clientrecord.EventBroadcaster { return clientGo(a[0], a[1]) }, opts)
				o := newSide(ctx, func(a ...any) clientrecord.EventBroadcaster { return ours(a[0], a[1]) }, opts)
				for _, s := range steps {
					if s.lose {
						for _, sd := range []*side{c, o} {
							sd.sink.Forget()
						}
					}
					for _, sd := range []*side{c, o} {
						sd.recorders[s.recorder].Event(s.obj, s.eventType, s.reason, s.message)
					}
					time.Sleep(s.wait + time.Millisecond) // both pipelines settle
				}
				c.b.Shutdown()
				o.b.Shutdown()

				cc, oc := c.sink.Calls(), o.sink.Calls()
				require.NotEmpty(t, cc)
				require.Equal(t, len(cc), len(oc), "number of sink calls")
				for i := range cc {
					assert.Equal(t, cc[i].Op, oc[i].Op, "call %d", i)
					assert.True(t, equality.Semantic.DeepEqual(cc[i].Event, oc[i].Event), "call %d: event\nclient-go: %+v\nours:      %+v", i, cc[i].Event, oc[i].Event)
					assert.Equal(t, cc[i].Patch, oc[i].Patch, "call %d: patch", i)
				}
				assert.Equal(t, c.logf.get(), o.logf.get(), "StartLogging lines")
				assert.Equal(t, c.structured.get(), o.structured.get(), "StartStructuredLogging lines")

				ops := map[string]int{}
				for _, x := range oc {
					ops[x.Op]++
				}
				st := o.b.(*record.Broadcaster).Stats()
				t.Logf("%d events: %v; ours: %+v", len(steps), ops, st)
				// The scripts exercise every decision.
				assert.NotZero(t, ops["patch"], "repeats")
				assert.NotZero(t, st.DroppedSpam, "spam filter")
				aggregated := false
				for _, x := range oc {
					aggregated = aggregated || strings.HasPrefix(x.Event.Message, "(combined from similar events): ")
				}
				assert.True(t, aggregated, "aggregation")
			})
		})
	}
}

// The recorder's log lines (WithLogger) for events it cannot build are
// client-go's: a nil object, an unsupported type, a kind the scheme does
// not know, a nil scheme.
func TestRecorderLogsEventsItCannotBuildAsClientGo(t *testing.T) {
	sides := map[string]func() clientrecord.EventBroadcaster{
		"client-go": func() clientrecord.EventBroadcaster { return clientrecord.NewBroadcaster() },
		"fanout":    func() clientrecord.EventBroadcaster { return record.NewBroadcaster() },
	}
	got := map[string][]string{}
	for name, mk := range sides {
		synctest.Test(t, func(t *testing.T) {
			b := mk()
			var l lines
			r := b.NewRecorder(scheme.Scheme, source).WithLogger(l.logger())
			r.Event(nil, v1.EventTypeNormal, "R", "nil object")
			r.Event(pod("a"), "Bogus", "R", "bad type")
			r.Event(&unregistered{}, v1.EventTypeNormal, "R", "unregistered")
			b.NewRecorder(nil, source).WithLogger(l.logger()).Event(&v1.Pod{}, v1.EventTypeNormal, "R", "nil scheme")
			got[name] = l.get()
			b.Shutdown()
			synctest.Wait()
		})
	}
	assert.Equal(t, got["client-go"], got["fanout"])
	assert.Len(t, got["fanout"], 4)
}
