package fanoutnats_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" { // a process of a test (see runRole)
		os.Exit(runRole(role))
	}
	goleak.VerifyTestMain(m)
}
