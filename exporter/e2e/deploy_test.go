//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// manifests decodes every object of exporter/deploy.
func manifests(t *testing.T) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "configmap.yaml", "deployment.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := dec.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// apply creates the objects.
func apply(ctx context.Context, c kubernetes.Interface, objs []runtime.Object) error {
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = c.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unexpected object %T in the manifests", o)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// request is one API request: verb, API group, resource, namespace, name.
type request struct{ verb, group, resource, namespace, name string }

// recorder is a RoundTripper that records the requests made through it.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[request]bool
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if isDiscovery(req.URL.Path) {
		// Non-resource URLs every authenticated user may get
		// (system:discovery); the lookups map kinds through them.
		return r.next.RoundTrip(req)
	}
	rq := parseRequest(req)
	r.mu.Lock()
	r.seen[rq] = true
	if rq.verb == "watch" && req.URL.Query().Get("sendInitialEvents") == "true" {
		// A watch-list: the reflector's replacement for list, which it
		// falls back to where the server does not serve watch-lists.
		// It returns what a list returns, and needs list permission.
		list := rq
		list.verb = "list"
		r.seen[list] = true
	}
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// isDiscovery reports whether path is a discovery path: /api, /api/v1,
// /apis, /apis/GROUP or /apis/GROUP/VERSION.
func isDiscovery(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return (parts[0] == "api" && len(parts) <= 2) || (parts[0] == "apis" && len(parts) <= 3)
}

// parseRequest maps a request's method and path to its RBAC attributes,
// for the paths the exporter uses (/api/v1/... and /apis/GROUP/VERSION/...).
func parseRequest(req *http.Request) request {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rq request
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rq.group, parts = parts[1], parts[3:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		rq.namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		rq.resource = parts[0]
	}
	if len(parts) > 1 {
		rq.name = parts[1]
	}
	switch req.Method {
	case http.MethodGet:
		rq.verb = "get"
		if rq.name == "" {
			rq.verb = "list"
		}
		if req.URL.Query().Get("watch") == "true" {
			rq.verb = "watch"
		}
	case http.MethodPost:
		rq.verb = "create"
	case http.MethodPut:
		rq.verb = "update"
	case http.MethodPatch:
		rq.verb = "patch"
	case http.MethodDelete:
		rq.verb = "delete"
	}
	return rq
}

// grant is one verb of one rule of the manifests: cluster-wide for a
// ClusterRole, in its namespace for a Role.
type grant struct {
	namespace string // "" for cluster-wide
	rule      rbacv1.PolicyRule
	verb      string
}

func (g grant) allows(rq request) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return (g.namespace == "" || g.namespace == rq.namespace) &&
		has(g.rule.APIGroups, rq.group) && has(g.rule.Resources, rq.resource) &&
		g.verb == rq.verb && (len(g.rule.ResourceNames) == 0 || slices.Contains(g.rule.ResourceNames, rq.name))
}

// grants returns the grants bound to the service account ns/name.
func grants(objs []runtime.Object, ns, name string) []grant {
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == ns && s.Name == name
		})
	}
	rules := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			rules["ClusterRole/"+o.Name] = o.Rules
		case *rbacv1.Role:
			rules["Role/"+o.Namespace+"/"+o.Name] = o.Rules
		}
	}
	var out []grant
	add := func(namespace string, rs []rbacv1.PolicyRule) {
		for _, r := range rs {
			for _, v := range r.Verbs {
				out = append(out, grant{namespace: namespace, rule: r, verb: v})
			}
		}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if bound(o.Subjects) {
				add("", rules["ClusterRole/"+o.RoleRef.Name])
			}
		case *rbacv1.RoleBinding:
			if bound(o.Subjects) && o.RoleRef.Kind == "Role" {
				add(o.Namespace, rules["Role/"+o.Namespace+"/"+o.RoleRef.Name])
			}
		}
	}
	return out
}

func TestManifestsApplyAndTheExporterRunsWithExactlyTheirRBAC(t *testing.T) {
	cfg, client := cluster(t)
	objs := manifests(t)
	if err := apply(t.Context(), client, objs); err != nil {
		t.Fatalf("applying exporter/deploy: %v", err)
	}
	parse(t, configYAML(t, objs)) // the shipped configuration is valid as is
	ns := apiservertest.Namespace(t, client, "rbac-events")
	rec := &recorder{seen: map[request]bool{}}
	saCfg := rest.CopyConfig(cfg)
	saCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:fanout-eventer:fanout-eventer"}
	saCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(saCfg) // lookups of the pods the events are about
	if err != nil {
		t.Fatal(err)
	}
	// Two runs, as after a restart: the first creates the checkpoint
	// ConfigMap and the Lease, the second reads and updates them, and
	// reads events.k8s.io/v1 (--events-api events.k8s.io/v1).
	for run := range 2 {
		sink := &countingSink{Sink: discard{}, done: make(chan struct{})}
		config := parse(t, strings.Replace(configYAML(t, objs), "interval: 5s", "interval: 100ms", 1))
		config.Receivers[0].Stdout, config.Receivers[0].Sink = nil, sink
		if run == 1 {
			config.API = exporter.EventsV1
		}
		stop := runExporter(t, exporter.Options{Config: config, Client: sa, Dynamic: dyn, LeaderElection: &exporter.LeaderElection{
			Namespace: "fanout-eventer", Name: "fanout-eventer", Identity: fmt.Sprintf("run-%d", run),
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}})
		if _, err := createEvents(t.Context(), client, ns, run*outageEvents, (run+1)*outageEvents, 4, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sink.done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("run %d: the exporter stored fewer than %d occurrences", run, outageEvents)
		}
		if err := stop(); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	checkRBAC(t, rec, grants(objs, "fanout-eventer", "fanout-eventer"))
	// The server enforces the grants (it authorizes with RBAC): what they
	// leave out is forbidden to the ServiceAccount.
	if _, err := sa.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets as the exporter's ServiceAccount: %v, want Forbidden", err)
	}
	if err := sa.CoreV1().Events(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting events as the exporter's ServiceAccount: %v, want Forbidden", err)
	}
}

// checkRBAC fails t if a request was not granted, or a grant was not used.
func checkRBAC(t *testing.T, rec *recorder, gs []grant) {
	t.Helper()
	used := make([]bool, len(gs))
	for rq := range rec.seen {
		ok := false
		for i, g := range gs {
			if g.allows(rq) {
				ok, used[i] = true, true
			}
		}
		if !ok {
			t.Errorf("request %+v is not granted by exporter/deploy/rbac.yaml", rq)
		}
	}
	for i, g := range gs {
		if !used[i] {
			t.Errorf("grant %s %v %v (names %v, namespace %q) was never used: not least privilege",
				g.verb, g.rule.APIGroups, g.rule.Resources, g.rule.ResourceNames, g.namespace)
		}
	}
	t.Logf("%d distinct requests, all granted; all %d grants used", len(rec.seen), len(gs))
}

func configYAML(t *testing.T, objs []runtime.Object) string {
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "fanout-eventer-config" {
			return cm.Data["config.yaml"]
		}
	}
	t.Fatal("no fanout-eventer-config ConfigMap")
	return ""
}

// discard stores nothing, successfully.
type discard struct{}

func (discard) Write(_ context.Context, b []*exporter.Occurrence) (int, error) { return len(b), nil }
func (discard) Close(context.Context) error                                    { return nil }
