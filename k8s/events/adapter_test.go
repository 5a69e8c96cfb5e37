package events

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEventBroadcasterAdapter(t *testing.T) {
	for _, served := range []bool{false, true} {
		name := "events.k8s.io/v1 not served"
		if served {
			name = "events.k8s.io/v1 served"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client := fake.NewClientset()
				if served {
					client.Resources = []*metav1.APIResourceList{{
						GroupVersion: "events.k8s.io/v1",
						APIResources: []metav1.APIResource{{Name: "events", Namespaced: true, Kind: "Event"}},
					}}
				}
				ctx, cancel := context.WithCancel(quietCtx(context.Background()))
				defer cancel()
				a := NewEventBroadcasterAdapterWithContext(ctx, client)
				stopCh := make(chan struct{})
				a.StartRecordingToSink(stopCh)
				r := a.NewRecorder("ctrl").WithLogger(quiet)
				_, ours := r.(*recorder)
				assert.Equal(t, served, ours, "our recorder exactly when the new API is served")
				r.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "Started", "Start", "hello %s", "there")
				// Event names hold the time: in a bubble, two events about
				// one object at one instant would have the same name.
				time.Sleep(time.Millisecond)
				a.DeprecatedNewLegacyRecorder("legacy").Event(pod("p", "ns"), corev1.EventTypeNormal, "Legacy", "old API")
				synctest.Wait()

				newEvents, err := client.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
				require.NoError(t, err)
				coreEvents, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
				require.NoError(t, err)
				var coreReasons []string
				for _, ev := range coreEvents.Items {
					coreReasons = append(coreReasons, ev.Reason)
				}
				if served {
					require.Len(t, newEvents.Items, 1)
					assert.Equal(t, "hello there", newEvents.Items[0].Note)
					assert.Equal(t, "ctrl", newEvents.Items[0].ReportingController)
					assert.ElementsMatch(t, []string{"Legacy"}, coreReasons)
				} else {
					assert.Empty(t, newEvents.Items)
					assert.ElementsMatch(t, []string{"Legacy", "Started"}, coreReasons)
				}
				close(stopCh)
				a.Shutdown()
				cancel()
				synctest.Wait()
			})
		})
	}
}

func TestNewEventBroadcasterAdapterBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewEventBroadcasterAdapter(fake.NewClientset())
		require.NotNil(t, a.NewRecorder("ctrl"))
		a.Shutdown()
	})
}
