package events

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Series scenarios compared with client-go's sink calls: a forbidden first
// create, a failing or forbidden final write, the six-minute boundary with a
// refresh, a patch retrying while occurrences arrive, a rejected series patch.
func TestMoreSeriesScenariosMatchClientGo(t *testing.T) {
	sec, min := time.Second, time.Minute
	forbidden := apierrors.NewForbidden(eventsGR, "x", nil)
	scenarios := []scenario{
		{
			name:  "first create forbidden then series",
			steps: repeats(0, sec, 2*sec, 3*sec),
			end:   20 * min,
			fail:  failCalls(forbidden, 0),
		},
		{
			name:  "final write transport error retried next pass",
			steps: repeats(0, sec, 2*sec),
			end:   25 * min,
			fail:  failCalls(errTransport, 2),
		},
		{
			name:  "final write forbidden forgets",
			steps: repeats(0, sec, 2*sec, 13*min, 13*min+sec),
			end:   25 * min,
			fail:  failCalls(forbidden, 2),
		},
		{
			name:  "series at exactly six minutes",
			steps: repeats(0, 0, 6*min, 12*min),
			end:   40 * min,
		},
		{
			name:    "second occurrence patch fails with transport while third arrives",
			steps:   repeats(0, sec, 2*sec),
			end:     25 * min,
			noTimes: true,
			fail:    failCalls(errTransport, 1, 2),
		},
		{
			name:  "patch rejected then more",
			steps: repeats(0, sec, 2*sec, 3*sec),
			end:   40 * min,
			fail:  failCalls(badRequest(), 1),
		},
	}
	compareWithClientGo(t, scenarios)
}
