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
			name: "first create forbidden then series",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "a", reason: "R"},
				{at: 2 * sec, obj: "a", reason: "R"},
				{at: 3 * sec, obj: "a", reason: "R"},
			},
			end: 20 * min,
			fail: func(n int, o op) error {
				if n == 0 {
					return forbidden
				}
				return nil
			},
		},
		{
			name: "final write transport error retried next pass",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "a", reason: "R"},
				{at: 2 * sec, obj: "a", reason: "R"},
			},
			end: 25 * min,
			fail: func(n int, o op) error {
				if n == 2 {
					return errTransport
				}
				return nil
			},
		},
		{
			name: "final write forbidden forgets",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "a", reason: "R"},
				{at: 2 * sec, obj: "a", reason: "R"},
				{at: 13 * min, obj: "a", reason: "R"},
				{at: 13*min + sec, obj: "a", reason: "R"},
			},
			end: 25 * min,
			fail: func(n int, o op) error {
				if n == 2 {
					return forbidden
				}
				return nil
			},
		},
		{
			name: "series at exactly six minutes",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: 0, obj: "a", reason: "R"},
				{at: 6 * min, obj: "a", reason: "R"},
				{at: 12 * min, obj: "a", reason: "R"},
			},
			end: 40 * min,
		},
		{
			name: "second occurrence patch fails with transport while third arrives",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "a", reason: "R"},
				{at: 2 * sec, obj: "a", reason: "R"},
			},
			end:     25 * min,
			noTimes: true,
			fail: func(n int, o op) error {
				if n == 1 || n == 2 {
					return errTransport
				}
				return nil
			},
		},
		{
			name: "patch rejected then more",
			steps: []step{
				{at: 0, obj: "a", reason: "R"},
				{at: sec, obj: "a", reason: "R"},
				{at: 2 * sec, obj: "a", reason: "R"},
				{at: 3 * sec, obj: "a", reason: "R"},
			},
			end: 40 * min,
			fail: func(n int, o op) error {
				if n == 1 {
					return badRequest()
				}
				return nil
			},
		},
	}
	compareWithClientGo(t, scenarios)
}
