package charttest

import (
	"slices"
	"strings"
	"testing"

	"github.com/fanout-go/fanout/exporter"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to this package.
const chartDir = "../../deploy/chart"

// release is the release name the tests install; the chart's objects are
// named after it.
const release = "fanout-eventer"

// render renders the chart with values (YAML, overriding values.yaml) as
// release in namespace ns, as `helm template` does, and returns its
// objects in a stable order.
func render(t *testing.T, ns, values string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: ns, Revision: 1,
		IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if strings.HasSuffix(name, ".yaml") && !yield(name) {
				return
			}
		}
	})
	var objs []*unstructured.Unstructured
	for _, name := range names {
		docs := releaseutil.SplitManifests(files[name])
		for _, key := range slices.Sorted(func(yield func(string) bool) {
			for k := range docs {
				if !yield(k) {
					return
				}
			}
		}) {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(docs[key]), &m); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, docs[key])
			}
			if len(m) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
	}
	return objs
}

// find returns the object of kind named name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// configOf returns the exporter's configuration in the chart's ConfigMap,
// parsed and validated as the exporter does at start.
func configOf(t *testing.T, objs []*unstructured.Unstructured) *exporter.Config {
	t.Helper()
	cm := find(objs, "ConfigMap", release+"-config")
	if cm == nil {
		t.Fatal("no ConfigMap " + release + "-config")
	}
	text, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg, err := exporter.ParseConfig("config.yaml", []byte(text))
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, text)
	}
	return cfg
}

// eventRules returns the API groups the ClusterRole grants list and watch
// of events in.
func eventRules(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var groups []string
	for _, r := range rulesOf(t, objs, "ClusterRole") {
		if slices.Equal(strs(r["resources"]), []string{"events"}) && slices.Equal(strs(r["verbs"]), []string{"list", "watch"}) {
			groups = append(groups, strs(r["apiGroups"])...)
		}
	}
	return groups
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func TestChartDefaultsRenderALoadableConfigAndEventRBACForBothAPIs(t *testing.T) {
	objs := render(t, "monitoring", "")
	cfg := configOf(t, objs)
	if cfg.API != exporter.CoreV1 || cfg.Checkpoint.ConfigMap == nil ||
		cfg.Checkpoint.ConfigMap.Namespace != "monitoring" || cfg.Checkpoint.ConfigMap.Name != release+"-checkpoint" {
		t.Errorf("api %q, checkpoint %+v: want v1 and the ConfigMap %s-checkpoint in the release's namespace",
			cfg.API, cfg.Checkpoint.ConfigMap, release)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	if g := eventRules(t, objs); !slices.Equal(g, []string{"", "events.k8s.io"}) {
		t.Errorf("the ClusterRole grants list and watch of events in %q, want core and events.k8s.io", g)
	}
	if find(objs, "ServiceMonitor", release) != nil {
		t.Error("a ServiceMonitor by default: it needs the Prometheus Operator's CRDs")
	}
	d := find(objs, "Deployment", release)
	if d == nil {
		t.Fatal("no Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if !slices.Contains(strs(c["args"]), "--leader-elect") || c["image"] != "fanout-eventer:v0.1.0" {
		t.Errorf("container args %v, image %v: want --leader-elect and the appVersion's image", c["args"], c["image"])
	}
	if mem, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); mem != "256Mi" {
		t.Errorf("memory limit %q, want the values' 256Mi", mem)
	}
}

func TestChartValuesSetTheEventsAPIReceiversServiceMonitorAndResources(t *testing.T) {
	objs := render(t, "ops", `
eventsApi: events.k8s.io/v1
watchNamespace: shop
serviceMonitor: {enabled: true, interval: 15s, labels: {release: prom}}
resources: {limits: {memory: 512Mi}}
env: [{name: HOOK_TOKEN, valueFrom: {secretKeyRef: {name: hook, key: token}}}]
config:
  logFormat: json
  route:
    routes: [{match: [{receiver: hook}]}]
  receivers:
    - name: hook
      webhook:
        endpoint: https://hooks.example.com/events
        headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
`)
	t.Setenv("HOOK_TOKEN", "secret")
	cfg := configOf(t, objs)
	if cfg.API != exporter.EventsV1 || cfg.Namespace != "shop" || len(cfg.Receivers) != 1 || cfg.Receivers[0].Webhook == nil {
		t.Errorf("api %q, namespace %q, receivers %d: want events.k8s.io/v1, shop and the webhook", cfg.API, cfg.Namespace, len(cfg.Receivers))
	}
	sm := find(objs, "ServiceMonitor", release)
	if sm == nil {
		t.Fatal("serviceMonitor.enabled rendered no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if ep := eps[0].(map[string]any); ep["port"] != "metrics" || ep["interval"] != "15s" || sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor endpoint %v, labels %v", ep, sm.GetLabels())
	}
	d := find(objs, "Deployment", release)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if mem, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); mem != "512Mi" {
		t.Errorf("memory limit %q, want 512Mi", mem)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	if len(env) != 3 || env[2].(map[string]any)["name"] != "HOOK_TOKEN" {
		t.Errorf("env %v: want POD_NAMESPACE, POD_NAME and HOOK_TOKEN", env)
	}
}

// getRules returns the ClusterRole's rules granting get.
func getRules(t *testing.T, objs []*unstructured.Unstructured) []map[string]any {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(find(objs, "ClusterRole", release).Object, "rules")
	var out []map[string]any
	for _, r := range rules {
		if r := r.(map[string]any); slices.Contains(strs(r["verbs"]), "get") {
			out = append(out, r)
		}
	}
	return out
}

func TestChartGrantsGetForLookupsUnlessOmitLookupOrNarrowed(t *testing.T) {
	g := getRules(t, render(t, "ops", ""))
	if len(g) != 1 || !slices.Equal(strs(g[0]["apiGroups"]), []string{"*"}) || !slices.Equal(strs(g[0]["resources"]), []string{"*"}) {
		t.Errorf("get rules %v, want kubernetes-event-exporter's wildcard get by default", g)
	}
	omit := render(t, "ops", "config: {omitLookup: true, receivers: [{name: stdout, stdout: {}}]}\n")
	if g := getRules(t, omit); len(g) != 0 {
		t.Errorf("get rules %v with omitLookup: true, want none", g)
	}
	if cfg := configOf(t, omit); !cfg.OmitLookup {
		t.Error("omitLookup: true did not reach the configuration")
	}
	narrow := render(t, "ops", "rbac: {lookupRules: [{apiGroups: [\"\"], resources: [pods], verbs: [get]}]}\n")
	if g := getRules(t, narrow); len(g) != 1 || !slices.Equal(strs(g[0]["resources"]), []string{"pods"}) {
		t.Errorf("get rules %v, want pods only", g)
	}
}

// container returns the Deployment's container.
func container(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := find(objs, "Deployment", release)
	if d == nil {
		t.Fatal("no Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	return containers[0].(map[string]any)
}

// rulesOf returns the rules of the release's object of kind (Role or
// ClusterRole).
func rulesOf(t *testing.T, objs []*unstructured.Unstructured, kind string) []map[string]any {
	t.Helper()
	o := find(objs, kind, release)
	if o == nil {
		t.Fatal("no " + kind)
	}
	rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
	out := make([]map[string]any, len(rules))
	for i, r := range rules {
		out[i] = r.(map[string]any)
	}
	return out
}

// leaseNames returns the Lease names the Role grants update on.
func leaseNames(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var names []string
	for _, r := range rulesOf(t, objs, "Role") {
		if slices.Equal(strs(r["resources"]), []string{"leases"}) && slices.Contains(strs(r["verbs"]), "update") {
			names = append(names, strs(r["resourceNames"])...)
		}
	}
	return names
}

// A kubernetes-event-exporter configuration names its own Lease and turns
// leader election on by itself: the chart passes the name its Role
// grants, and grants it whichever of the two turns leader election on.
func TestChartLeadsOnTheLeaseItsRoleGrantsWhoeverTurnsLeaderElectionOn(t *testing.T) {
	const theirs = "config: {leaderElection: {enabled: true, leaderElectionID: kubernetes-event-exporter}}\n"
	for values, leads := range map[string]bool{
		"": true, theirs: true, "leaderElection: {enabled: false}\n" + theirs: true,
		"leaderElection: {enabled: false}\n": false,
	} {
		objs := render(t, "ops", values)
		args := strs(container(t, objs)["args"])
		names := leaseNames(t, objs)
		switch {
		case leads && (!slices.Contains(args, "--leader-elect-name="+release) || !slices.Equal(names, []string{release})):
			t.Errorf("%q: args %v, Lease rules %v: want --leader-elect-name=%s and the Role granting it", values, args, names, release)
		case !leads && (slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) || len(names) > 0):
			t.Errorf("%q: args %v, Lease rules %v: want no leader election", values, args, names)
		}
	}
}

func TestChartMountsExtraVolumesAndTakesTheirPortAndProbePaths(t *testing.T) {
	objs := render(t, "ops", `
metrics: {port: 2112}
probes: {livenessPath: /-/healthy, readinessPath: /-/ready}
extraEnv: [{name: TZ, value: UTC}]
extraVolumes: [{name: tls, secret: {secretName: hook-tls}}, {name: out, emptyDir: {}}]
extraVolumeMounts: [{name: tls, mountPath: /etc/hook-tls, readOnly: true}, {name: out, mountPath: /var/log/events}]
`)
	c := container(t, objs)
	if !slices.Contains(strs(c["args"]), "--listen=:2112") {
		t.Errorf("args %v, want --listen=:2112", c["args"])
	}
	if p, _, _ := unstructured.NestedString(c, "livenessProbe", "httpGet", "path"); p != "/-/healthy" {
		t.Errorf("liveness path %q", p)
	}
	if p, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path"); p != "/-/ready" {
		t.Errorf("readiness path %q", p)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	if last := env[len(env)-1].(map[string]any); last["name"] != "TZ" {
		t.Errorf("env %v, want extraEnv's TZ last", env)
	}
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	vols, _, _ := unstructured.NestedSlice(find(objs, "Deployment", release).Object, "spec", "template", "spec", "volumes")
	if len(mounts) != 3 || len(vols) != 3 || mounts[2].(map[string]any)["mountPath"] != "/var/log/events" ||
		vols[1].(map[string]any)["name"] != "tls" {
		t.Errorf("mounts %v, volumes %v: want the config's and both extra ones", mounts, vols)
	}
	svc := find(objs, "Service", release)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if p := ports[0].(map[string]any); p["port"] != int64(2112) && p["port"] != float64(2112) {
		t.Errorf("service port %v, want 2112", p["port"])
	}
}
