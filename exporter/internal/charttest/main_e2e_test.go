//go:build e2e

package charttest

import (
	"os"
	"testing"

	"github.com/fanout-go/fanout/k8s/apiservertest"
)

func TestMain(m *testing.M) {
	os.Exit(apiservertest.RunTests(m))
}
