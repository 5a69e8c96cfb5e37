//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// lookupObjects creates the objects the events of the lookup test are
// about, and returns their references (by name).
func lookupObjects(t *testing.T, client kubernetes.Interface, ns string) map[string]corev1.ObjectReference {
	t.Helper()
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: "rs-uid"}}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}, OwnerReferences: owner}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-canary", Labels: map[string]string{"app": "web-canary"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"app": "db"}}},
	}
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-settings", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"owner": "team-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	}
	refs := map[string]corev1.ObjectReference{
		"ghost": {APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "ghost", UID: "never-created"},
	}
	for _, p := range pods {
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
		p, err := client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs[p.Name] = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID,
			ResourceVersion: p.ResourceVersion}
	}
	for _, cm := range cms {
		cm, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs[cm.Name] = corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name, UID: cm.UID}
	}
	return refs
}

// lookupRecord is what the test reads of a record.
type lookupRecord struct {
	InvolvedObject struct {
		Name            string                  `json:"name"`
		Labels          map[string]string       `json:"labels"`
		Annotations     map[string]string       `json:"annotations"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		Deleted         bool                    `json:"deleted"`
	} `json:"involvedObject"`
}

// readRecords returns the records of a file sink, by involved object name.
func readRecords(t *testing.T, path string) map[string]lookupRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]lookupRecord{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r lookupRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, dup := out[r.InvolvedObject.Name]; dup {
			t.Errorf("%s: two records about %s", path, r.InvolvedObject.Name)
		}
		out[r.InvolvedObject.Name] = r
	}
	return out
}

func TestLabelsAndAnnotationsRulesRouteOnObjectsReadFromTheAPIServer(t *testing.T) {
	cfg, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "lookup")
	dir, addr := t.TempDir(), freeAddr(t)
	refs := lookupObjects(t, client, ns)
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`
namespace: %[1]s
route:
  match:
    - receiver: all
    - labels: {app: ^web$}
      receiver: web
    - kind: ConfigMap
      annotations: {owner: team}
      receiver: owned
receivers:
  - {name: all, file: {path: %[2]s/all.jsonl}}
  - {name: web, file: {path: %[2]s/web.jsonl}}
  - {name: owned, file: {path: %[2]s/owned.jsonl}}
`, ns, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "--config", config, "--kubeconfig", kubeconfig(t, cfg), "--listen", addr)
	waitReady(t, addr)
	names := slices.Sorted(maps.Keys(refs))
	for i, name := range names {
		e := event(ns, i, "about "+name)
		e.InvolvedObject = refs[name]
		if _, err := client.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFileKeys(t, filepath.Join(dir, "all.jsonl"), len(refs))
	requests := childMetric(t, addr, "fanout_eventer_lookup_requests_total")
	errs := childMetric(t, addr, `fanout_eventer_lookup_errors_total{reason="error"}`) +
		childMetric(t, addr, `fanout_eventer_lookup_errors_total{reason="forbidden"}`)
	if err := c.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if requests != float64(len(refs)) || errs != 0 {
		t.Errorf("%v lookup requests, %v errors; want one per object (%d), none failed", requests, errs, len(refs))
	}
	checkLookupRecords(t, dir)
}

func checkLookupRecords(t *testing.T, dir string) {
	t.Helper()
	web := readRecords(t, filepath.Join(dir, "web.jsonl"))
	if got := slices.Sorted(maps.Keys(web)); !slices.Equal(got, []string{"web", "web-settings"}) {
		t.Errorf("the labels rule app: ^web$ sent %v, want web and web-settings", got)
	}
	if r := web["web"].InvolvedObject; r.Labels["tier"] != "front" || len(r.OwnerReferences) != 1 ||
		r.OwnerReferences[0].Name != "web-rs" || r.Deleted {
		t.Errorf("record about web: involvedObject %+v, want its labels and owner", r)
	}
	owned := readRecords(t, filepath.Join(dir, "owned.jsonl"))
	if got := slices.Sorted(maps.Keys(owned)); !slices.Equal(got, []string{"web-settings"}) ||
		owned["web-settings"].InvolvedObject.Annotations["owner"] != "team-a" {
		t.Errorf("the annotations rule owner: team sent %v, want web-settings with its annotations", got)
	}
	all := readRecords(t, filepath.Join(dir, "all.jsonl"))
	if g := all["ghost"].InvolvedObject; !g.Deleted || g.Labels != nil {
		t.Errorf("record about the missing pod: involvedObject %+v, want deleted", g)
	}
	if p := all["plain"].InvolvedObject; p.Deleted || p.Labels != nil {
		t.Errorf("record about the unlabelled configmap: involvedObject %+v", p)
	}
}
