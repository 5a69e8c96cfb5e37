package observability_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// OpenCensus, which Google's Pub/Sub client (linked by the exporter)
	// still links, starts its stats worker in an init function: it runs
	// for the life of the process, whatever the tests do.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
