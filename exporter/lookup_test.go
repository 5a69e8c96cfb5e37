package exporter

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// lookupEnv is a Lookup against client-go's fake dynamic client, serving
// pods, configmaps and nodes, with a clock the test moves.
type lookupEnv struct {
	l    *Lookup
	dyn  *dynamicfake.FakeDynamicClient
	disc *fakediscovery.FakeDiscovery
	now  time.Time
}

func newLookupEnv(t *testing.T, size int, objs ...runtime.Object) *lookupEnv {
	t.Helper()
	e := &lookupEnv{dyn: dynamicfake.NewSimpleDynamicClient(scheme.Scheme, objs...), now: time.Unix(1e9, 0)}
	e.disc = fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	e.disc.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get"}},
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get"}},
		{Name: "nodes", Kind: "Node", Verbs: metav1.Verbs{"get"}},
	}}}
	var err error
	e.l, err = NewLookup(e.dyn, e.disc, LookupOptions{CacheSize: size, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// gets returns how many gets reached the fake API server.
func (e *lookupEnv) gets() int {
	n := 0
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		Labels: labels, Annotations: map[string]string{"note": "of " + name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}}}}
}

func podRef(name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: name}
}

func TestLookupReturnsLabelsAnnotationsAndOwnersOnceThenFromTheCache(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	for range 3 {
		m := e.l.Get(context.Background(), podRef("web"))
		if m == nil || m.Labels["app"] != "web" || m.Annotations["note"] != "of web" ||
			len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Name != "rs" || m.Deleted {
			t.Fatalf("metadata %+v", m)
		}
	}
	if st := e.l.Stats(); e.gets() != 1 || st.Requests != 1 || st.CacheHits != 2 {
		t.Errorf("%d gets, stats %+v; want one get, then two cache hits", e.gets(), st)
	}
}

func TestMissingObjectIsReportedDeletedWithoutMetadata(t *testing.T) {
	e := newLookupEnv(t, 0)
	m := e.l.Get(context.Background(), podRef("gone"))
	if m == nil || !m.Deleted || m.Labels != nil {
		t.Fatalf("metadata %+v, want deleted", m)
	}
	if st := e.l.Stats(); st.Deleted != 1 || st.Errors["error"] != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestObjectOfTheSameNameWithAnotherUIDIsReportedDeleted(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	ref := podRef("web")
	ref.UID = "an-older-pod"
	if m := e.l.Get(context.Background(), ref); m == nil || !m.Deleted || m.Labels != nil {
		t.Fatalf("metadata %+v, want deleted without the new pod's labels", m)
	}
	ref.UID = "uid-web"
	if m := e.l.Get(context.Background(), ref); m == nil || m.Deleted || m.Labels["app"] != "web" {
		t.Fatalf("metadata %+v, want the pod's", m)
	}
}

func TestObjectBeingDeletedIsReportedDeletedWithItsLabels(t *testing.T) {
	p := pod("web", map[string]string{"app": "web"})
	p.DeletionTimestamp, p.Finalizers = new(metav1.Now()), []string{"x"}
	e := newLookupEnv(t, 0, p)
	if m := e.l.Get(context.Background(), podRef("web")); m == nil || !m.Deleted || m.Labels["app"] != "web" {
		t.Fatalf("metadata %+v", m)
	}
}

func TestCacheHoldsAtMostCacheSizeObjects(t *testing.T) {
	e := newLookupEnv(t, 2, pod("a", nil), pod("b", nil), pod("c", nil))
	for _, name := range []string{"a", "b", "c", "c", "b", "a"} {
		e.l.Get(context.Background(), podRef(name))
	}
	// a, b, c are read; c and b are in the cache; a was evicted by c.
	if st := e.l.Stats(); e.gets() != 4 || st.CacheHits != 2 {
		t.Errorf("%d gets, %d hits; want 4 gets (a read again after its eviction), 2 hits", e.gets(), st.CacheHits)
	}
}

func TestEntriesAreReadAgainAfterTheTTLAndWhenTheReferencedVersionChanges(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"v": "1"}))
	ctx := context.Background()
	e.l.Get(ctx, podRef("web"))
	relabel(t, e, "web", "2")
	if m := e.l.Get(ctx, podRef("web")); m.Labels["v"] != "1" {
		t.Fatalf("label %q within the TTL, want the cached 1", m.Labels["v"])
	}
	ref := podRef("web")
	ref.ResourceVersion = "2" // the event names a newer version of the object
	if m := e.l.Get(ctx, ref); m.Labels["v"] != "2" {
		t.Fatalf("label %q for a new resource version, want 2", m.Labels["v"])
	}
	relabel(t, e, "web", "3")
	e.now = e.now.Add(DefaultLookupTTL)
	if m := e.l.Get(ctx, podRef("web")); m.Labels["v"] != "3" {
		t.Fatalf("label %q after the TTL, want 3", m.Labels["v"])
	}
}

func relabel(t *testing.T, e *lookupEnv, name, v string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	u, err := e.dyn.Resource(gvr).Namespace("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"v": v})
	if _, err := e.dyn.Resource(gvr).Namespace("ns").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestForbiddenLookupIsCountedRememberedForTheErrorTTLThenRetried(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", nil))
	forbid := true
	e.dyn.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if forbid {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", nil)
		}
		return false, nil, nil
	})
	ctx := context.Background()
	for range 2 {
		if m := e.l.Get(ctx, podRef("web")); m != nil {
			t.Fatalf("metadata %+v, want none", m)
		}
	}
	if st := e.l.Stats(); e.gets() != 1 || st.Errors["forbidden"] != 2 {
		t.Errorf("%d gets, errors %v; want one get, two forbidden lookups", e.gets(), st.Errors)
	}
	forbid = false
	e.now = e.now.Add(DefaultLookupErrorTTL)
	if m := e.l.Get(ctx, podRef("web")); m == nil || e.gets() != 2 {
		t.Errorf("after the error TTL: metadata %+v, %d gets; want it read again", m, e.gets())
	}
}

func TestTimeoutsAndOtherErrorsAreCountedByReason(t *testing.T) {
	e := newLookupEnv(t, 0)
	e.dyn.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "slow" {
			return true, nil, apierrors.NewTimeoutError("slow", 1)
		}
		return true, nil, apierrors.NewInternalError(context.Canceled)
	})
	e.l.Get(context.Background(), podRef("slow"))
	e.l.Get(context.Background(), podRef("broken"))
	if st := e.l.Stats(); st.Errors["timeout"] != 1 || st.Errors["error"] != 1 {
		t.Errorf("errors %v, want one timeout, one error", st.Errors)
	}
}

func TestLookupAfterTheContextEndedIsNeitherCountedNorRemembered(t *testing.T) {
	e := newLookupEnv(t, 0)
	e.dyn.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, context.Canceled
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m := e.l.Get(ctx, podRef("web")); m != nil {
		t.Fatalf("metadata %+v", m)
	}
	if st := e.l.Stats(); st.Errors["error"]+st.Errors["timeout"] != 0 || e.l.cache.Len() != 0 {
		t.Errorf("errors %v, %d cached", st.Errors, e.l.cache.Len())
	}
}

func TestUnknownKindIsUnmappedUntilDiscoveredAgainAMinuteLater(t *testing.T) {
	widget := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Labels: map[string]string{"app": "w"}}}
	e := newLookupEnv(t, 0, widget)
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Widget", Namespace: "ns", Name: "w"}
	ctx := context.Background()
	if m := e.l.Get(ctx, ref); m != nil || e.l.Stats().Errors["unmapped"] != 1 {
		t.Fatalf("metadata %+v, errors %v; want unmapped", m, e.l.Stats().Errors)
	}
	// The kind is installed (a CustomResourceDefinition); served here by
	// the configmaps resource.
	e.disc.Resources[0].APIResources = append(e.disc.Resources[0].APIResources,
		metav1.APIResource{Name: "configmaps", Kind: "Widget", Namespaced: true, Verbs: metav1.Verbs{"get"}})
	e.now = e.now.Add(DefaultLookupErrorTTL)
	if m := e.l.Get(ctx, ref); m != nil {
		t.Fatalf("metadata %+v within a minute of the last discovery, want none", m)
	}
	e.now = e.now.Add(rediscoverEvery)
	if m := e.l.Get(ctx, ref); m == nil || m.Labels["app"] != "w" {
		t.Fatalf("metadata %+v after a new discovery, want the widget's", m)
	}
}

func TestClusterScopedObjectIsReadWithoutTheReferencesNamespace(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}}}
	e := newLookupEnv(t, 0, node)
	// core/v1 events about nodes name the default namespace.
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Namespace: "default", Name: "n1"}
	if m := e.l.Get(context.Background(), ref); m == nil || m.Labels["zone"] != "a" {
		t.Fatalf("metadata %+v", m)
	}
}

// lookupPipeline returns a pipeline of the configuration yaml whose
// receivers' sinks are replaced by memSinks (by name), looking objects up
// in e (nil: no lookup).
func lookupPipeline(t *testing.T, e *lookupEnv, yaml string) (*Pipeline, map[string]*memSink) {
	t.Helper()
	c, err := ParseConfig("test", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	sinks := map[string]*memSink{}
	for _, r := range c.Receivers {
		sinks[r.Name] = &memSink{}
		r.Stdout, r.Sink = nil, sinks[r.Name]
	}
	opts := PipelineOptions{}
	if e != nil {
		opts.Lookup = e.l
	}
	p, err := NewPipeline(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sinks
}

// about returns an occurrence of event uid about the pod name in ns.
func about(uid, name string) *Occurrence {
	o := occ(uid, 1, "ns")
	o.Regarding = ObjectRef{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: name}
	return o
}

func publish(t *testing.T, p *Pipeline, os ...*Occurrence) {
	t.Helper()
	for _, o := range os {
		if err := p.Occurred(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLabelsAndAnnotationsRulesNeedEveryNameWithAValueMatchingUnanchored(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "my-web-1", "tier": "front"}),
		pod("web2", map[string]string{"app": "web"}), pod("db", map[string]string{"app": "db", "tier": "front"}))
	p, sinks := lookupPipeline(t, e, `route:
  match:
    - labels: {app: web, tier: ^front$}
      receiver: web
    - annotations: {note: "of d"}
      receiver: notes
receivers: [{name: web, stdout: {}, format: fanout}, {name: notes, stdout: {}, format: fanout}]
`)
	publish(t, p, about("1", "web"), about("2", "web2"), about("3", "db"), about("4", "missing"))
	if got := sinks["web"].stored(); !slices.Equal(got, []string{"1/1"}) {
		t.Errorf("web got %v, want only the event about the pod with both labels matching", got)
	}
	if got := sinks["notes"].stored(); !slices.Equal(got, []string{"3/1"}) {
		t.Errorf("notes got %v, want the event about db", got)
	}
}

func TestObjectsAreLookedUpOnlyForRulesWithLabelsOrRecordsThatCarryThem(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	p, sinks := lookupPipeline(t, e, `route:
  match:
    - kind: Pod
      receiver: plain
    - namespace: other
      labels: {app: web}
      receiver: labelled
receivers: [{name: plain, log: {}}, {name: labelled, stdout: {}, format: fanout}]
`)
	publish(t, p, about("1", "web"))
	if e.gets() != 0 || len(sinks["plain"].stored()) != 1 {
		t.Errorf("%d gets, plain got %v; want no lookup: the log sink and format fanout carry no object, and the labels rule's namespace does not match",
			e.gets(), sinks["plain"].stored())
	}
}

func TestEventRecordsCarryTheLookedUpLabelsAnnotationsOwnersAndDeleted(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	p, _ := lookupPipeline(t, e, "receivers: [{name: a, stdout: {}}]\nroute: {match: [{receiver: a}]}\n")
	web, gone := about("1", "web"), about("2", "gone")
	publish(t, p, web, gone)
	for _, c := range []struct {
		o    *Occurrence
		want []string
	}{
		{web, []string{`"labels":{"app":"web"}`, `"annotations":{"note":"of web"}`, `"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-uid"}]`, `"deleted":false`}},
		{gone, []string{`"name":"gone","apiVersion":"v1","deleted":true}`}},
	} {
		rec := string(c.o.EventJSON(""))
		for _, w := range c.want {
			if !strings.Contains(rec, w) {
				t.Errorf("record %s lacks %s", rec, w)
			}
		}
	}
	if e.gets() != 2 {
		t.Errorf("%d gets, want one per object", e.gets())
	}
}

func TestFailedLookupLetsTheOccurrenceThroughWithoutMetadata(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	e.dyn.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", nil)
	})
	p, sinks := lookupPipeline(t, e, `route:
  match:
    - labels: {app: web}
      receiver: labelled
    - receiver: all
receivers: [{name: labelled, stdout: {}}, {name: all, stdout: {}}]
`)
	o := about("1", "web")
	publish(t, p, o)
	if len(sinks["labelled"].stored()) != 0 || len(sinks["all"].stored()) != 1 {
		t.Errorf("labelled got %v, all got %v; want the labels rule not to match, the other to",
			sinks["labelled"].stored(), sinks["all"].stored())
	}
	if rec := string(o.EventJSON("")); strings.Contains(rec, `"labels"`) || !strings.Contains(rec, `"deleted":false`) {
		t.Errorf("record %s, want no labels, not deleted", rec)
	}
	if st := e.l.Stats(); st.Errors["forbidden"] != 1 {
		t.Errorf("errors %v, want one forbidden lookup: one per occurrence, for its rule and its record", st.Errors)
	}
}

// lookupSamples returns the values of the lookup counters m exposes, by
// metric name (and reason label for errors).
func lookupSamples(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "fanout_eventer_lookup_") {
			continue
		}
		for _, s := range f.GetMetric() {
			name := f.GetName()
			for _, l := range s.GetLabel() {
				name += "/" + l.GetValue()
			}
			out[name] = s.GetCounter().GetValue()
		}
	}
	return out
}

func TestRunLooksUpWithItsDynamicClientAndExposesTheCounters(t *testing.T) {
	for _, omit := range []bool{false, true} {
		e := newLookupEnv(t, 0, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
		s := &memSink{target: 1, reached: make(chan struct{})}
		c := testConfig(t, s)
		c.OmitLookup = omit
		m := NewMetrics()
		stop := runExporter(t, Options{Config: c, Client: fake.NewClientset(coreEvent("a", 1)), Dynamic: e.dyn,
			Discovery: e.disc, Metrics: m})
		<-s.reached
		got := lookupSamples(t, m)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{"fanout_eventer_lookup_requests_total": 1, "fanout_eventer_lookup_cache_hits_total": 0,
			"fanout_eventer_lookup_deleted_total": 0, "fanout_eventer_lookup_errors_total/forbidden": 0,
			"fanout_eventer_lookup_errors_total/unmapped": 0, "fanout_eventer_lookup_errors_total/timeout": 0,
			"fanout_eventer_lookup_errors_total/error": 0}
		wantGets := 1
		if omit {
			want, wantGets = map[string]float64{}, 0
		}
		if !maps.Equal(got, want) || e.gets() != wantGets {
			t.Errorf("omitLookup %v: lookup samples %v, %d gets; want %v", omit, got, e.gets(), want)
		}
	}
}

// hangingAPIServer serves discovery of v1 pods, and gets of pods that
// answer only when the request is cancelled.
func hangingAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(path, body string) {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		})
	}
	reply("/api", `{"kind":"APIVersions","versions":["v1"]}`)
	reply("/apis", `{"kind":"APIGroupList","groups":[]}`)
	reply("/api/v1", `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","namespaced":true,"kind":"Pod","verbs":["get"]}]}`)
	mux.HandleFunc("/api/v1/namespaces/ns/pods/", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// restLookup returns a lookup with a 50 ms timeout, getting objects with
// rc and discovering (unthrottled) from rc's host.
func restLookup(t *testing.T, rc *rest.Config) *Lookup {
	t.Helper()
	disc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: rc.Host})
	l, err := NewLookup(dynamic.NewForConfigOrDie(rc), disc, LookupOptions{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLookupOfAnObjectTheServerDoesNotAnswerEndsAtTheTimeoutAsATimeout(t *testing.T) {
	l := restLookup(t, hangingAPIServer(t))
	if m := l.Get(context.Background(), podRef("web")); m != nil {
		t.Fatalf("metadata %+v", m)
	}
	if st := l.Stats(); st.Requests != 1 || st.Errors["timeout"] != 1 {
		t.Errorf("stats %+v, want one request, timed out", st)
	}
}

func TestLookupThrottledBeyondItsTimeoutFailsAtOnceAsATimeout(t *testing.T) {
	rc := hangingAPIServer(t)
	rc.QPS, rc.Burst = 0.001, 1 // the first get takes the only token for 1000 s
	l := restLookup(t, rc)
	for _, name := range []string{"web", "db"} {
		if m := l.Get(context.Background(), podRef(name)); m != nil {
			t.Fatalf("metadata %+v", m)
		}
	}
	if st := l.Stats(); st.Errors["timeout"] != 2 {
		t.Errorf("errors %v, want both lookups timed out (the second throttled)", st.Errors)
	}
}

func TestLayoutsReadTheLookedUpLabelsAndDeleted(t *testing.T) {
	e := newLookupEnv(t, 0, pod("web", map[string]string{"app": "web"}))
	yaml := `route: {match: [{receiver: a}]}
receivers:
  - name: a
    stdout:
      layout: {app: "{{ index .InvolvedObject.Labels \"app\" }}", gone: "{{ .InvolvedObject.Deleted }}"}
`
	c, err := ParseConfig("test", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	enc := c.Receivers[0].encoder("")
	p, _ := lookupPipeline(t, e, yaml)
	web, gone := about("1", "web"), about("2", "gone")
	publish(t, p, web, gone)
	for o, want := range map[*Occurrence]string{web: `{"app":"web","gone":"false"}`, gone: `{"app":"","gone":"true"}`} {
		if b, err := enc(o); err != nil || string(b) != want {
			t.Errorf("layout of %s: %s, %v; want %s", o.Regarding.Name, b, err, want)
		}
	}
}
