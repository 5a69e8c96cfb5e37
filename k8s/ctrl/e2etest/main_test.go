//go:build e2e

package e2etest

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if err := apiservertest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the e2e env:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
