package k8s_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// No package of the adapter module, tests included, depends on Prometheus:
// the collector lives in the separate module
// github.com/fanout-go/fanout/k8s/metrics, so that a controller importing
// record or events links no more than client-go's tools/record would.
func TestNoPackageDependsOnPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-tags", "e2e", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{
		"github.com/fanout-go/fanout/k8s/record",
		"github.com/fanout-go/fanout/k8s/events",
		"k8s.io/client-go/tools/record",
	} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s: the check would prove nothing", want)
		}
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/prometheus/") {
			t.Errorf("the k8s module depends on %s; only github.com/fanout-go/fanout/k8s/metrics may", d)
		}
	}
}
