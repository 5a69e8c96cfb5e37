//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

// childEnv, set in a child process's environment, makes the test binary
// run the fanout-eventer command with the arguments it holds (one a line)
// instead of the tests.
const childEnv = "FANOUT_EVENTER_E2E_CHILD"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := exporter.Main(ctx, strings.Split(args, "\n"), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	klog.SetLogger(logr.Discard()) // outages and kills provoke many logged errors
	code := m.Run()
	if err := apiservertest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping kube-apiserver and etcd:", err)
		code = 1
	}
	if code == 0 {
		// OpenCensus, which Google's Pub/Sub client (a sink of the
		// exporter) links, starts its stats worker in an init function.
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}
