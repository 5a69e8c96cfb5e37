package record_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// client-go's and our error logs for the failures the tests provoke
	// would only be noise.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
