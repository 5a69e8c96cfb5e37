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
	// nats.go v1.55 starts resetPendingAcksOnReconnect with a JetStream
	// context's first async publish; it reads the status channel under
	// the publisher's lock. CleanupPublisher (a Forwarder's Close) sets
	// that channel to nil under the same lock: if it runs first, the
	// goroutine reads nil and blocks for ever. A race of the client's
	// (jetstream/publish.go, jetstream.go cleanupReplySub), one goroutine
	// per closed publisher, which no caller can avoid.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
