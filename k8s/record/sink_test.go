package record_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clientrecord "k8s.io/client-go/tools/record"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// A repeat whose Patch meets a 404 and whose fallback Create then fails
// with a transport error is retried. client-go clears ResourceVersion on
// the event itself before that Create, so the retried Patch carries an
// empty resourceVersion; so does this package's.
func TestRetryAfter404PatchesWithoutResourceVersionAsClientGo(t *testing.T) {
	run := func(t *testing.T, b clientrecord.EventBroadcaster) []sinkCall {
		sink := apitest.NewCoreSink()
		creates := 0
		sink.Fail = func(c sinkCall) error {
			if c.Op == "create" {
				if creates++; creates == 2 {
					return errors.New("connection refused")
				}
			}
			return nil
		}
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		synctest.Wait()
		time.Sleep(time.Second)
		sink.Forget() // the server lost the event
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		time.Sleep(time.Minute)
		b.Shutdown()
		return sink.Calls()
	}
	var theirs, ours []sinkCall
	synctest.Test(t, func(t *testing.T) { theirs = run(t, clientrecord.NewBroadcasterForTests(time.Second)) })
	synctest.Test(t, func(t *testing.T) { ours = run(t, record.NewBroadcasterForTests(time.Second)) })
	var opsT, opsO, rvT, rvO []string
	for _, c := range theirs {
		opsT, rvT = append(opsT, c.Op), append(rvT, c.Event.ResourceVersion)
	}
	for _, c := range ours {
		opsO, rvO = append(opsO, c.Op), append(rvO, c.Event.ResourceVersion)
	}
	require.Equal(t, opsT, opsO)
	assert.Equal(t, rvT, rvO, "resourceVersion of the event passed to each sink call")
}
