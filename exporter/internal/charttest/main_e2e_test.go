//go:build e2e

package charttest

import (
	"os"
	"testing"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// OpenCensus, which Google's Pub/Sub client (a sink of the exporter)
	// links, starts its stats worker in an init function.
	os.Exit(apiservertest.RunTests(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")))
}
