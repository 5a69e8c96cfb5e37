package record_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// Any input is recorded or counted as invalid, never a panic, and every
// recorded event is written (the sink accepts all) or skipped by the spam
// filter: Recorded = Written + DroppedSpam.
func FuzzRecorderInput(f *testing.F) {
	f.Add(uint8(0), "Normal", "Started", "started %s", "web", "ns", "k", "v")
	f.Add(uint8(1), "Warning", "", "%!d(string=x) %%", "UPPER_case", "", "", "")
	f.Add(uint8(2), "Bogus", "R", "", "", "ns", "a", "b")
	f.Add(uint8(3), "Normal", "R\x00", "\xff\xfe", "a.very.long."+string(make([]byte, 300)), "n", "k", "")
	f.Add(uint8(4), "Warning", "R", "m", "x", "y", "", "")
	f.Fuzz(func(t *testing.T, kind uint8, eventType, reason, message, name, namespace, key, value string) {
		b := record.New()
		defer b.Shutdown()
		sink := apitest.NewCoreSink()
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "fuzz"})
		var obj k8sruntime.Object
		switch kind % 5 {
		case 0:
			obj = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(key)}}
		case 1:
			obj = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		case 2:
			obj = &v1.ObjectReference{Kind: name, Namespace: namespace, Name: value}
		case 3:
			obj = (*v1.Pod)(nil)
		case 4:
			obj = nil
		}
		var annotations map[string]string
		if key != "" {
			annotations = map[string]string{key: value}
		}
		r.Event(obj, eventType, reason, message)
		r.Eventf(obj, eventType, reason, message, name)
		r.AnnotatedEventf(obj, annotations, eventType, reason, message, value)
		require.NoError(t, b.Flush(t.Context()))
		st := b.Stats()
		assert.Equal(t, uint64(3), st.Recorded+st.Invalid)
		assert.Equal(t, st.Recorded, st.Written+st.DroppedSpam, "%+v", st)
		for _, c := range sink.Calls() {
			assert.NotEmpty(t, c.Event.Name, "an event always has a name")
			assert.NotEmpty(t, c.Event.Namespace, "and a namespace")
		}
	})
}
