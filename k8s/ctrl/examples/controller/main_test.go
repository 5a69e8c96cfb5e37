//go:build e2e

package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	os.Exit(apiservertest.RunTests(m))
}

// The controller, with leader election, records an event about each pod
// of its namespace on a real API server, and when it stops prints the
// counters: everything written, nothing dropped.
func TestControllerRecordsAnEventPerPod(t *testing.T) {
	env := apiservertest.Shared(t)
	admin, err := kubernetes.NewForConfig(env.Config())
	require.NoError(t, err)
	ns := apiservertest.Namespace(t, admin, "example-controller")
	for _, name := range []string{"web-1", "web-2"} {
		_, err := admin.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, &out, env.Config(), ns, true) }()
	require.Eventually(t, func() bool {
		list, err := admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Observed"})
		return err == nil && len(list.Items) == 2
	}, time.Minute, 50*time.Millisecond, "an event per pod")
	cancel()
	require.NoError(t, <-done)
	assert.Regexp(t, `^recorded \d+, written \d+, merged into series \d+, dropped 0\n$`, out.String())
}
