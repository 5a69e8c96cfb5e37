//go:build e2e

package e2etest

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	os.Exit(apiservertest.RunTests(m))
}
