//go:build !e2e

package charttest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// OpenCensus, which Google's Pub/Sub client (a sink of the exporter)
	// links, starts its stats worker in an init function, for the life of
	// the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
