//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
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
	if _, err := client.CoreV1().Namespaces().Get(t.Context(), "fanout-eventer", metav1.GetOptions{}); err == nil {
		// The manifests' namespace and cluster roles are applied as
		// shipped, and namespaces are never gone (no namespace
		// controller runs): the process ran this test before.
		t.Fatal("namespace fanout-eventer exists already: the shipped manifests apply once per API server; " +
			"repeat this test in a new process (a loop of go test -count 1), not with -count")
	}
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

// relocate returns the manifests' objects for namespace ns, so that a test
// can apply them beside others on the shared API server: the Namespace is
// left out, the namespaced objects and the subjects of the bindings move
// to ns, and the cluster-scoped objects (and their references) take ns as
// a suffix.
func relocate(objs []runtime.Object, ns string) []runtime.Object {
	var out []runtime.Object
	subjects := func(ss []rbacv1.Subject) {
		for i := range ss {
			ss[i].Namespace = ns
		}
	}
	for _, o := range objs {
		o = o.DeepCopyObject()
		switch o := o.(type) {
		case *corev1.Namespace:
			continue
		case *rbacv1.ClusterRole:
			o.Name += "-" + ns
		case *rbacv1.ClusterRoleBinding:
			o.Name += "-" + ns
			o.RoleRef.Name += "-" + ns
			subjects(o.Subjects)
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			subjects(o.Subjects)
		case metav1.Object:
			o.SetNamespace(ns)
		}
		out = append(out, o)
	}
	return out
}

// containerArgs returns the args of the manifests' Deployment's container.
func containerArgs(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatal("no Deployment in the manifests")
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount ns/name with a token the API server issued for it (as the
// kubelet mounts one in the pod), not by impersonation.
func serviceAccountKubeconfig(t *testing.T, cfg *rest.Config, client kubernetes.Interface, ns, name string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saCfg := rest.CopyConfig(cfg)
	saCfg.BearerToken = tr.Status.Token
	return kubeconfig(t, saCfg)
}

// theirLeaderElectionConfig writes a kubernetes-event-exporter
// configuration that names its own Lease, watching ns and writing to a
// file in dir, and returns its path.
func theirLeaderElectionConfig(t *testing.T, ns, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`logLevel: info
logFormat: json
namespace: %s
leaderElection:
  enabled: true
  leaderElectionID: kubernetes-event-exporter
route:
  routes:
    - match:
        - receiver: dump
receivers:
  - name: dump
    file:
      path: %s
`, ns, filepath.Join(dir, "events.json"))), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// deployedAsTheirs applies exporter/deploy in a namespace of its own, name, and
// returns it, with the args of its Deployment's container set to run a
// kubernetes-event-exporter configuration (theirLeaderElectionConfig) as
// its ServiceAccount, listening on addr, and the namespace of the events.
func deployedAsTheirs(t *testing.T, name, addr string) (client kubernetes.Interface, ns, evNS, dir string, args []string) {
	t.Helper()
	cfg, client := cluster(t)
	ns = apiservertest.Namespace(t, client, name)
	objs := relocate(manifests(t), ns)
	if err := apply(t.Context(), client, objs); err != nil {
		t.Fatalf("applying exporter/deploy in %s: %v", ns, err)
	}
	evNS, dir = apiservertest.Namespace(t, client, name+"-events"), t.TempDir()
	for _, a := range containerArgs(t, objs) {
		switch {
		case strings.HasPrefix(a, "--config="):
			a = "--config=" + theirLeaderElectionConfig(t, evNS, dir)
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=" + addr
		}
		args = append(args, a)
	}
	return client, ns, evNS, dir, append(args, "--kubeconfig", serviceAccountKubeconfig(t, cfg, client, ns, "fanout-eventer"))
}

// waitRenewed waits until the Lease ns/name is held by id and renewed
// since it was acquired: this replica may update it.
func waitRenewed(t *testing.T, client kubernetes.Interface, ns, name, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l, err := client.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == id && l.Spec.RenewTime != nil &&
			l.Spec.AcquireTime != nil && l.Spec.RenewTime.After(l.Spec.AcquireTime.Time) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Lease %s/%s was not renewed by %s within a minute: %v %v", ns, name, id, l, err)
		}
	}
}

// A kubernetes-event-exporter configuration names its own Lease; run as
// exporter/deploy runs it, as its ServiceAccount, the exporter leads on
// the Lease the manifests' RBAC grants, renews it, and exports, both when
// the Lease does not exist yet and when it does (after a restart).
func TestDeployLeadsOnTheLeaseItsRBACGrantsWithTheirLeaderElectionID(t *testing.T) {
	addr := freeAddr(t)
	client, ns, evNS, dir, args := deployedAsTheirs(t, "deploy-theirs", addr)
	leases := client.CoordinationV1().Leases(ns)
	for run, id := range []string{"pod-a", "pod-b"} {
		_, err := leases.Get(t.Context(), "fanout-eventer", metav1.GetOptions{})
		if exists := err == nil; exists != (run == 1) {
			t.Fatalf("run %d: the Lease exists: %v (%v)", run, exists, err)
		}
		c := startPipedChild(t, []string{"POD_NAMESPACE=" + ns}, append(args, "--leader-elect-identity", id)...)
		waitReady(t, addr)
		waitRenewed(t, client, ns, "fanout-eventer", id)
		keys := map[string]bool{}
		for i := range 5 {
			e, err := client.CoreV1().Events(evNS).Create(t.Context(), event(evNS, 10*run+i, "deployed"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			keys[exporter.Key(string(e.UID), 1)] = true
		}
		got := fileKeys(t, filepath.Join(dir, "events.json"), keys)
		for deadline := time.Now().Add(time.Minute); !got.has(keys); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: the exporter did not export the 5 events within a minute", run)
			}
			got = fileKeys(t, filepath.Join(dir, "events.json"), keys)
		}
		if err := c.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("run %d: exit %v, want 0", run, err)
		}
	}
	if _, err := leases.Get(t.Context(), "kubernetes-event-exporter", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Lease named after leaderElectionID: %v, want none", err)
	}
}

// Where the RBAC does not grant the Lease the exporter is told to use, it
// exits at start naming what it may not do, rather than lead until its
// first renewal fails and then stand by for ever.
func TestExporterRefusesToStartOnALeaseItsRBACDoesNotGrant(t *testing.T) {
	addr := freeAddr(t)
	_, ns, _, _, args := deployedAsTheirs(t, "deploy-refused", addr)
	c := startPipedChild(t, []string{"POD_NAMESPACE=" + ns},
		append(args, "--leader-elect-name=kubernetes-event-exporter", "--leader-elect-identity", "pod-a")...)
	select {
	case err := <-c.done:
		c.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit %v, want 1", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still running after a minute, want an exit at start")
	}
	want := "may not update leases.coordination.k8s.io kubernetes-event-exporter in namespace " + ns
	if !slices.ContainsFunc(logLines(t, c.child), func(l string) bool { return strings.Contains(l, want) }) {
		t.Errorf("no log line says %q:\n%s", want, strings.Join(logLines(t, c.child), "\n"))
	}
}
