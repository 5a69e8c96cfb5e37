package record_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// burstCalls records the same event n times, gap apart, into a sink taking
// 10 ms a call, through the broadcaster mk makes, and returns each sink
// call as "op count name rv".
func burstCalls(t *testing.T, mk func(context.Context) clientrecord.EventBroadcaster, n int, gap time.Duration) []string {
	var out []string
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b := mk(ctx)
		sink := apitest.NewCoreSink()
		sink.Delay = 10 * time.Millisecond
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		for range n {
			r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "same message")
			time.Sleep(gap)
		}
		time.Sleep(time.Second)
		b.Shutdown()
		for _, c := range sink.Calls() {
			out = append(out, fmt.Sprintf("%s count=%d name=%s rv=%q", c.Op, c.Event.Count, c.Event.Name, c.Event.ResourceVersion))
		}
	})
	return out
}

// Repeats of an event recorded faster than the sink writes are patched, as
// in client-go, with the resourceVersion the sink returned for the write
// before each: with several writers the correlator runs ahead of the
// writes (it has counted the later repeats before the earlier writes
// return), but the writes of one event are in order, and each patch refers
// to what the one before it stored. Back to back, and spaced less than a
// write apart; one writer and the default.
func TestRepeatsFasterThanTheSinkPatchTheVersionItStored(t *testing.T) {
	for _, gap := range []time.Duration{0, 4 * time.Millisecond} {
		cg := burstCalls(t, func(ctx context.Context) clientrecord.EventBroadcaster {
			return clientrecord.NewBroadcaster(clientrecord.WithContext(ctx))
		}, 5, gap)
		require.Len(t, cg, 5)
		require.Equal(t, `patch count=5 name=`+strings.Fields(cg[0])[2][len("name="):]+` rv="4"`, cg[4], "client-go's, for the check's sake")
		for _, writers := range []int{1, record.DefaultWriters} {
			ours := burstCalls(t, func(ctx context.Context) clientrecord.EventBroadcaster {
				return record.NewBroadcaster(record.WithContext(ctx), record.WithWriters(writers))
			}, 5, gap)
			assert.Equal(t, cg, ours, "gap %v, %d writers", gap, writers)
		}
	}
}
