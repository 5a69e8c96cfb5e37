package apiservertest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The package's shared Env: one kube-apiserver and etcd per test binary.
var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Shared returns the test binary's shared [Env], starting it on first use
// (building the binaries if they are missing: a test never skips for want of
// them), and fails t if it cannot start. Call [StopShared] from TestMain
// after the tests have run.
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		shared.env, shared.err = New(ctx)
	})
	if shared.err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", shared.err)
	}
	return shared.env
}

// StopShared stops the shared [Env] if [Shared] started it. It is meant for
// TestMain, after m.Run.
func StopShared() error {
	if shared.env == nil {
		return nil
	}
	return shared.env.Stop()
}

// RunTests is the TestMain of a package whose tests use [Shared]: it runs
// m, stops the shared [Env], and, when every test passed, fails if a
// goroutine is left running (goleak.Find, with opts: goroutines that a
// dependency starts for the life of the process). It returns the exit
// code:
//
//	func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m)) }
func RunTests(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the e2e env:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// Namespace creates a namespace for one test with client and returns its
// name: name, or, if a namespace of that name exists already, name-2,
// name-3 and so on — a test run again in the same process (go test
// -count 2) shares the API server with its earlier run, whose namespaces
// are never gone (no namespace controller runs to finish deleting them).
// It fails t if it cannot create one.
func Namespace(t testing.TB, client kubernetes.Interface, name string) string {
	t.Helper()
	for i := 1; i <= maxNamespaceTries; i++ {
		try := name
		if i > 1 {
			try = fmt.Sprintf("%s-%d", name, i)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: try}}
		_, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
		switch {
		case err == nil:
			return try
		case !apierrors.IsAlreadyExists(err):
			t.Fatal(err)
		}
	}
	t.Fatalf("namespaces %s to %s-%d exist already", name, name, maxNamespaceTries)
	return ""
}

// maxNamespaceTries bounds the names [Namespace] tries.
const maxNamespaceTries = 100
