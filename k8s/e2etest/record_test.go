//go:build e2e

package e2etest

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	clientrecord "k8s.io/client-go/tools/record"

	"github.com/fanout-go/fanout/k8s/record"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
}

func coreSink(client kubernetes.Interface) record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
}

// coreEvents lists a namespace's core/v1 events about one object.
func coreEvents(t *testing.T, client kubernetes.Interface, ns, object string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", object).String(),
	})
	require.NoError(t, err)
	return list.Items
}

func flush(t *testing.T, f interface{ Flush(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, f.Flush(ctx))
}

// Events land: a first occurrence is created, repeats become a count patch,
// ten distinct messages become a combined event, the spam filter's skips are
// counted, and a watch on the API sees what was written.
func TestRecordLandsInAPIServer(t *testing.T) {
	_, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "record-lands")
	w, err := client.CoreV1().Events(ns).Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	b := record.New()
	defer b.Shutdown()
	b.StartRecordingToSink(coreSink(client))
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "e2e", Host: "node-1"})

	// Repeats: one event, count 3.
	for range 3 {
		r.Event(pod(ns, "repeat"), corev1.EventTypeNormal, "Pulled", "image pulled")
	}
	// Aggregation: 12 messages with one reason; from the 10th on they are
	// combined.
	for i := range 12 {
		r.Eventf(pod(ns, "aggregate"), corev1.EventTypeWarning, "BackOff", "restart %d", i)
	}
	// Spam: 30 different reasons about one object; the budget is 25.
	for i := range 30 {
		r.Eventf(pod(ns, "spam"), corev1.EventTypeNormal, fmt.Sprint("Reason", i), "m")
	}
	flush(t, b)

	rep := coreEvents(t, client, ns, "repeat")
	require.Len(t, rep, 1)
	assert.Equal(t, int32(3), rep[0].Count)
	assert.Equal(t, "image pulled", rep[0].Message)
	assert.Equal(t, "e2e", rep[0].ReportingController)
	assert.Equal(t, "node-1", rep[0].ReportingInstance)
	assert.True(t, rep[0].LastTimestamp.After(rep[0].FirstTimestamp.Time) || rep[0].LastTimestamp.Equal(&rep[0].FirstTimestamp))

	agg := coreEvents(t, client, ns, "aggregate")
	combined, plain := 0, 0
	for _, e := range agg {
		if e.Message == "(combined from similar events): restart 11" {
			combined++
			assert.Equal(t, int32(3), e.Count, "the 10th, 11th and 12th are counted on the combined event")
		} else {
			plain++
		}
	}
	assert.Equal(t, 1, combined)
	assert.Equal(t, 9, plain)

	assert.Len(t, coreEvents(t, client, ns, "spam"), 25)
	st := b.Stats()
	assert.Equal(t, uint64(5), st.DroppedSpam)
	assert.Equal(t, uint64(45), st.Recorded)
	assert.Equal(t, st.Recorded, st.Written+st.DroppedSpam)
	assert.Zero(t, st.Failures)

	// The watch saw every write: 1+9+1+25 creates and 2+2 patches.
	added, modified := countWatch(t, w, 40)
	assert.Equal(t, 36, added)
	assert.Equal(t, 4, modified)
}

// kube-apiserver is stopped for 30 s while events are recorded, then
// restarted: every event recorded during the outage, all within the retry
// budget (12 tries 10 s apart), arrives exactly once, through both
// adapters. client-go's record broadcaster, recording the same events
// beside ours, is the reference.
func TestSurvivesAPIServerOutage(t *testing.T) {
	env, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "record-outage")
	ours := record.New()
	defer ours.Shutdown()
	ours.StartRecordingToSink(coreSink(client))
	theirs := clientrecord.NewBroadcaster()
	defer theirs.Shutdown()
	theirs.StartRecordingToSink(coreSink(client))
	recorders := map[string]record.EventRecorder{
		"ours":   ours.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ours"}),
		"theirs": theirs.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "theirs"}),
	}

	ev := newEvents(t, client)
	evr := ev.NewRecorder(scheme.Scheme, "outage")

	require.NoError(t, env.StopAPIServer())
	const n = 15
	for i := range n {
		for who, r := range recorders {
			// One object per event: neither aggregated nor spam-filtered.
			r.Eventf(pod(ns, fmt.Sprintf("%s-%d", who, i)), corev1.EventTypeNormal, "During", "outage event %d", i)
		}
		evr.Eventf(pod(ns, fmt.Sprintf("events-%d", i)), nil, corev1.EventTypeNormal, "During", "Outage", "outage event %d", i)
		time.Sleep(2 * time.Second) // 30 s in all
	}
	require.NoError(t, env.StartAPIServer())
	flush(t, ours)
	flush(t, ev)

	notes := map[string]int{}
	for _, e := range eventsIn(t, client, ns) {
		if e.ReportingController == "outage" {
			notes[e.Note]++
			assert.Nil(t, e.Series)
		}
	}
	for i := range n {
		assert.Equal(t, 1, notes[fmt.Sprintf("outage event %d", i)], "events.k8s.io outage event %d arrives exactly once", i)
	}
	assert.Len(t, notes, n)
	est := ev.Stats()
	assert.Equal(t, uint64(n), est.Written)
	assert.Zero(t, est.Dropped())
	assert.NotZero(t, est.Failures)

	bySource := func(who string) map[string]int {
		list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		seen := map[string]int{}
		for _, e := range list.Items {
			if e.Source.Component == who {
				seen[e.Message] += int(e.Count)
			}
		}
		return seen
	}
	seen := bySource("ours")
	for i := range n {
		assert.Equal(t, 1, seen[fmt.Sprintf("outage event %d", i)], "outage event %d arrives exactly once", i)
	}
	assert.Len(t, seen, n)
	st := ours.Stats()
	assert.Equal(t, uint64(n), st.Written)
	assert.Zero(t, st.Dropped())
	assert.NotZero(t, st.Failures, "writes failed during the outage")

	// client-go, with the same budget, delivers them too (it has no
	// Flush: poll).
	require.Eventually(t, func() bool { return len(bySource("theirs")) == n }, 2*time.Minute, time.Second)
}

// A burst of 10,000 events: goroutines stay bounded by the sinks, memory
// stays bounded, and what the queue or the filters could not take is
// counted, so that everything recorded is accounted for and the API server
// holds exactly what was written.
func TestRecordBurstIsBoundedAndAccounted(t *testing.T) {
	// client-go's default client-side limit (5 requests/s) would make the
	// test wait minutes for the writes the queue took.
	_, client := cluster(t, func(c *rest.Config) { c.QPS, c.Burst = 1000, 1000 })
	ns := apiservertest.Namespace(t, client, "record-burst")
	// The spam filter lifted, so that every occurrence the sink sees is
	// written and the server's counts add up to the writes.
	b := record.New(record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 1 << 30}))
	defer b.Shutdown()
	b.StartRecordingToSink(coreSink(client))
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "burst"})

	burst(t, func(i int) {
		r.Eventf(pod(ns, fmt.Sprint("p", i%50)), corev1.EventTypeNormal, "Burst", "event %d", i%400)
	})

	flush(t, b)
	st := b.Stats()
	assert.Equal(t, uint64(burstEvents), st.Recorded)
	assert.NotZero(t, st.DroppedFull, "a burst overflows the queue, counted")
	assert.Equal(t, st.Recorded, st.Written+st.DroppedFull+st.DroppedRejected, "every event accounted for: %+v", st)

	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var total int64
	for _, e := range list.Items {
		total += int64(e.Count)
	}
	assert.Equal(t, int64(st.Written), total, "each write is one occurrence on the server")
	t.Logf("burst: %+v, %d events on the server", st, len(list.Items))
}
