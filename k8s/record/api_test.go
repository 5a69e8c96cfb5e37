package record_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/fanout-go/fanout/k8s/metrics"
	"github.com/fanout-go/fanout/k8s/record"
)

// Compile-time: every constructor and method has client-go's signature, and
// the aliased types are client-go's own.
var (
	_ func(...record.BroadcasterOption) clientrecord.EventBroadcaster    = record.NewBroadcaster
	_ func(time.Duration) clientrecord.EventBroadcaster                  = record.NewBroadcasterForTests
	_ func(clientrecord.CorrelatorOptions) clientrecord.EventBroadcaster = record.NewBroadcasterWithCorrelatorOptions
	_ func(time.Duration) record.BroadcasterOption                       = record.WithSleepDuration
	_ func(clientrecord.CorrelatorOptions) record.BroadcasterOption      = record.WithCorrelatorOptions
	_ func(context.Context) record.BroadcasterOption                     = record.WithContext

	_ func(clock.PassiveClock) *record.EventCorrelator                                     = record.NewEventCorrelator
	_ func(clientrecord.CorrelatorOptions) *record.EventCorrelator                         = record.NewEventCorrelatorWithOptions
	_ func(*record.EventCorrelator, *v1.Event) (*clientrecord.EventCorrelateResult, error) = (*record.EventCorrelator).EventCorrelate
	_ func(*record.EventCorrelator, *v1.Event)                                             = (*record.EventCorrelator).UpdateState

	_ func(int, clientrecord.EventAggregatorKeyFunc, clientrecord.EventAggregatorMessageFunc, int, int, clock.PassiveClock) *record.EventAggregator = record.NewEventAggregator
	_ func(*record.EventAggregator, *v1.Event) (*v1.Event, string)                                                                                  = (*record.EventAggregator).EventAggregate
	_ func(int, int, float32, clock.PassiveClock, clientrecord.EventSpamKeyFunc) *record.EventSourceObjectSpamFilter                                = record.NewEventSourceObjectSpamFilter
	_ func(*record.EventSourceObjectSpamFilter, *v1.Event) bool                                                                                     = (*record.EventSourceObjectSpamFilter).Filter

	_ clientrecord.EventAggregatorKeyFunc     = record.EventAggregatorByReasonFunc
	_ clientrecord.EventAggregatorMessageFunc = record.EventAggregatorByReasonMessageFunc

	_ func(clientrecord.EventRecorderLogger) *record.EventRecorderAdapter = record.NewEventRecorderAdapter
	_ func(int) *record.FakeRecorder                                      = record.NewFakeRecorder
	_ clientrecord.EventRecorderLogger                                    = (*record.FakeRecorder)(nil)
	_ clientrecord.EventBroadcaster                                       = (*record.Broadcaster)(nil)
	_ metrics.Source                                                      = (*record.Broadcaster)(nil)

	_ clientrecord.EventSink          = record.EventSink(nil)
	_ clientrecord.EventRecorder      = record.EventRecorder(nil)
	_ clientrecord.EventFilterFunc    = record.EventFilterFunc(nil)
	_ clientrecord.EventSpamKeyFunc   = record.EventSpamKeyFunc(nil)
	_ *clientrecord.CorrelatorOptions = (*record.CorrelatorOptions)(nil)
	_ func(*v1.Event) bool            = record.EventFilterFunc(nil)
)

// exported returns the exported top-level names and Type.Method names
// declared in the non-test Go files of dir.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						names[d.Name.Name] = true
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
						names[id.Name+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								names[s.Name.Name] = true
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									names[n.Name] = true
								}
							}
						}
					}
				}
			}
		}
	}
	return names
}

// Every exported name of client-go's tools/record (functions, types and the
// methods of its exported types) exists here.
func TestEveryClientGoNameExists(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "k8s.io/client-go/tools/record").Output()
	require.NoError(t, err)
	theirs := exported(t, strings.TrimSpace(string(out)))
	require.Contains(t, theirs, "NewBroadcaster", "the parse found client-go's names")
	ours := exported(t, ".")
	aliases := map[string]bool{"EventSink": true, "EventRecorder": true, "EventRecorderLogger": true,
		"EventBroadcaster": true, "CorrelatorOptions": true, "EventCorrelateResult": true}
	for name := range theirs {
		typ, _, isMethod := strings.Cut(name, ".")
		if isMethod && aliases[typ] {
			continue // a method of an aliased type is client-go's own
		}
		assert.True(t, ours[name], "missing %s", name)
	}
}

func TestStatsAndCollector(t *testing.T) {
	b := record.New()
	defer b.Shutdown()
	r := b.NewRecorder(nil, source)
	r.Event(nil, v1.EventTypeNormal, "R", "invalid")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, prometheus.Labels{"component": "test"})))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fanout_k8s_events_dropped_total Events lost, by cause.
# TYPE fanout_k8s_events_dropped_total counter
fanout_k8s_events_dropped_total{component="test",reason="invalid"} 1
fanout_k8s_events_dropped_total{component="test",reason="queue_full"} 0
fanout_k8s_events_dropped_total{component="test",reason="rejected"} 0
fanout_k8s_events_dropped_total{component="test",reason="retries_exhausted"} 0
fanout_k8s_events_dropped_total{component="test",reason="shutdown"} 0
fanout_k8s_events_dropped_total{component="test",reason="shutdown_refused"} 0
fanout_k8s_events_dropped_total{component="test",reason="spam_filtered"} 0
`), metrics.NameDropped))
}
