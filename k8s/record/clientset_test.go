package record_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/fanout-go/fanout/k8s/record"
)

// Through client-go's own sink and fake clientset: repeats are patched
// into the stored event, a transient error is retried, an API rejection is
// not, and an event the server lost is created again from the patch's 404.
func TestWithFakeClientset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		b := record.New()
		t.Cleanup(b.Shutdown)
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		r := b.NewRecorder(scheme.Scheme, source)

		failCreates := 0
		client.PrependReactor("create", "events", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
			e := a.(clienttesting.CreateAction).GetObject().(*v1.Event)
			switch {
			case e.Reason == "Forbidden":
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, e.Name, errors.New("no"))
			case e.Reason == "Flaky" && failCreates < 2:
				failCreates++
				return true, nil, errors.New("connection reset")
			}
			return false, nil, nil
		})

		for range 3 {
			r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		}
		r.Event(pod("web"), v1.EventTypeWarning, "Forbidden", "rejected")
		r.Event(pod("api"), v1.EventTypeNormal, "Flaky", "retried")
		require.NoError(t, b.Flush(t.Context()))

		list, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		byReason := map[string]v1.Event{}
		for _, e := range list.Items {
			byReason[e.Reason] = e
		}
		assert.Len(t, list.Items, 2)
		assert.Equal(t, int32(3), byReason["Pulled"].Count, "two strategic-merge patches applied by the fake server")
		assert.Equal(t, "retried", byReason["Flaky"].Message)
		assert.Equal(t, 2, failCreates)

		// The server loses the event: the next repeat's patch gets a 404 and
		// is created again under the same name, with its count.
		require.NoError(t, client.CoreV1().Events("ns").Delete(context.Background(), byReason["Pulled"].Name, metav1.DeleteOptions{}))
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		require.NoError(t, b.Flush(t.Context()))
		again, err := client.CoreV1().Events("ns").Get(context.Background(), byReason["Pulled"].Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(4), again.Count)

		var patches int
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" {
				patches++
			}
		}
		assert.Equal(t, 3, patches)
		st := b.Stats()
		assert.Equal(t, uint64(1), st.DroppedRejected, "the forbidden event, not retried")
		assert.Equal(t, uint64(3), st.Failures, "two transient failures and the rejection")
	})
}
