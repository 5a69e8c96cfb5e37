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
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/fanout-go/fanout/k8s/events"
)

// newEvents returns an events.k8s.io broadcaster recording to the API
// server, stopped at the end of the test.
func newEvents(t *testing.T, client kubernetes.Interface, opts ...events.Option) *events.Broadcaster {
	t.Helper()
	b, err := events.New(&events.EventSinkImpl{Interface: client.EventsV1()}, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); b.Shutdown() })
	require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
	return b
}

func eventsIn(t *testing.T, client kubernetes.Interface, ns string) []eventsv1.Event {
	t.Helper()
	list, err := client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

// The first occurrence is created, the second turns it into a series of
// count 2 by a patch, later ones are merged until the refresh; a watch on
// the API sees both writes; related objects and actions are stored.
func TestEventsSeriesLandInAPIServer(t *testing.T) {
	_, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "events-series")
	w, err := client.EventsV1().Events(ns).Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	b := newEvents(t, client)
	r := b.NewRecorder(scheme.Scheme, "e2e-controller")
	for range 4 {
		r.Eventf(pod(ns, "web"), pod(ns, "sidecar"), corev1.EventTypeWarning, "BackOff", "Restarting", "back-off restarting %s", "web")
	}
	r.Eventf(pod(ns, "other"), nil, corev1.EventTypeNormal, "Scheduled", "Binding", "bound")
	flush(t, b)

	got := eventsIn(t, client, ns)
	require.Len(t, got, 2)
	byName := map[string]eventsv1.Event{}
	for _, e := range got {
		byName[e.Regarding.Name] = e
	}
	web := byName["web"]
	require.NotNil(t, web.Series, "the second occurrence made a series")
	assert.Equal(t, int32(2), web.Series.Count, "later occurrences wait for the refresh")
	assert.Equal(t, "back-off restarting web", web.Note)
	assert.Equal(t, "Restarting", web.Action)
	require.NotNil(t, web.Related)
	assert.Equal(t, "sidecar", web.Related.Name)
	assert.Equal(t, "e2e-controller", web.ReportingController)
	assert.Contains(t, web.ReportingInstance, "e2e-controller-")
	assert.Nil(t, byName["other"].Series)

	st := b.Stats()
	assert.Equal(t, uint64(5), st.Recorded)
	assert.Equal(t, uint64(3), st.Written, "two creates and one series patch")
	assert.Equal(t, uint64(2), st.Merged)
	assert.Zero(t, st.Dropped())

	added, modified := countWatch(t, w, 3)
	assert.Equal(t, 2, added)
	assert.Equal(t, 1, modified)
}

// NewEventBroadcasterAdapter finds events.k8s.io/v1 served and records
// through it.
func TestEventsAdapterUsesEventsV1(t *testing.T) {
	_, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "events-adapter")
	a := events.NewEventBroadcasterAdapter(client)
	stop := make(chan struct{})
	a.StartRecordingToSink(stop)
	defer func() { close(stop); a.Shutdown() }()
	a.NewRecorder("adapter").Eventf(pod(ns, "web"), nil, corev1.EventTypeNormal, "Synced", "Sync", "synced")
	require.Eventually(t, func() bool { return len(eventsIn(t, client, ns)) == 1 }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, "adapter", eventsIn(t, client, ns)[0].ReportingController)
}

// A burst of 10,000 events.k8s.io events: client-go starts a goroutine per
// event (kubernetes/kubernetes#140393); here goroutines stay bounded by the
// sinks and every event is written, merged into a series or counted as
// dropped.
func TestEventsBurstIsBoundedAndAccounted(t *testing.T) {
	_, client := cluster(t, func(c *rest.Config) { c.QPS, c.Burst = 1000, 1000 })
	ns := apiservertest.Namespace(t, client, "events-burst")
	b := newEvents(t, client)
	r := b.NewRecorder(scheme.Scheme, "burst")
	burst(t, func(i int) {
		r.Eventf(pod(ns, fmt.Sprint("p", i%300)), nil, corev1.EventTypeNormal, "Burst", "Act", "event %d", i)
	})
	flush(t, b)
	st := b.Stats()
	assert.Equal(t, uint64(burstEvents), st.Recorded)
	assert.Equal(t, st.Recorded, st.Written+st.Merged+st.DroppedFull+st.DroppedRejected, "every event accounted for: %+v", st)
	items := eventsIn(t, client, ns)
	series := 0
	for _, e := range items {
		if e.Series != nil {
			series++
		}
	}
	// Each object's first occurrence is created and its second patched.
	assert.Equal(t, int(st.Written), len(items)+series, "writes on the server: %+v", st)
	t.Logf("burst: %+v; %d events on the server, %d series", st, len(items), series)
}
