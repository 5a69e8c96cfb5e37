package events

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			theirs := runClientGo(t, sc)
			ours := runOurs(t, sc)
			if sc.noTimes {
				for _, ops := range [][]op{theirs, ours} {
					for i := range ops {
						ops[i].At = 0
					}
				}
			}
			for _, ops := range [][]op{theirs, ours} {
				slices.SortStableFunc(ops, func(a, b op) int {
					return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Name, b.Name))
				})
			}
			require.NotEmpty(t, theirs)
			if !assert.Equal(t, theirs, ours) {
				for i, o := range theirs {
					t.Logf("client-go %d: %v", i, o)
				}
				for i, o := range ours {
					t.Logf("ours      %d: %v", i, o)
				}
			}
		})
	}
	_ = strings.HasPrefix
}
