package record

import (
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fast path gives client-go's bytes on every event it takes, and takes
// the usual ones.
func TestRepeatPatchFastPath(t *testing.T) {
	messages := []string{"", "plain", "<b>&amp;</b>", "quote \" and \\ and \n", "ünïcødé ✓", "bad utf8 \xff\xfe", "\u2028\u2029", "\x00\x1f"}
	times := []time.Time{{}, time.Unix(0, 0), time.Unix(0, 999), time.Unix(1, 0), time.Unix(1_700_000_000, 123456789), time.Date(2026, 11, 21, 23, 59, 59, 0, time.FixedZone("x", 3600))}
	counts := []int32{0, 1, 2, 3, -1, 1 << 30, -(1 << 31)}
	rng := rand.New(rand.NewPCG(1, 2))
	fast := 0
	check := func(e *v1.Event) {
		t.Helper()
		want, err := slowRepeatPatch(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastRepeatPatch(e)
		if ok {
			fast++
			if string(got) != string(want) {
				t.Errorf("count %d, last %v, message %q:\nfast %s\nslow %s", e.Count, e.LastTimestamp, e.Message, got, want)
			}
		}
		if p, _ := repeatPatch(e); string(p) != string(want) {
			t.Errorf("repeatPatch differs from client-go's for %+v", e)
		}
	}
	for _, m := range messages {
		for _, ts := range times {
			for _, c := range counts {
				check(&v1.Event{Message: m, LastTimestamp: metav1.NewTime(ts), Count: c, Reason: "R"})
			}
		}
	}
	for range 2000 {
		var msg string
		if rng.IntN(2) == 0 { // arbitrary bytes, mostly invalid UTF-8
			b := make([]byte, rng.IntN(20))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			msg = string(b)
		} else { // valid UTF-8 with escapes, HTML and wide runes
			r := make([]rune, rng.IntN(20))
			for i := range r {
				r[i] = []rune{'a', '"', '\\', '<', '&', '\n', 0, 0x7f, 0xe9, 0x2028, 0x1f600, 0xfffd}[rng.IntN(12)]
			}
			msg = string(r)
		}
		check(&v1.Event{
			Message:        msg,
			LastTimestamp:  metav1.NewTime(time.Unix(rng.Int64N(4e9)-1e9, rng.Int64N(1e9))),
			FirstTimestamp: metav1.NewTime(time.Unix(rng.Int64N(4e9), 0)),
			Count:          rng.Int32N(100) - 5,
		})
	}
	if fast < 900 {
		t.Errorf("the fast path took only %d events", fast)
	}
}

// The fast path's only allocation is the patch: the timestamp and a
// message that needs no escape are written into it directly.
func TestRepeatPatchAllocatesOnlyThePatch(t *testing.T) {
	e := &v1.Event{Message: "synced pod ns/p", Count: 3, LastTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0))}
	if n := testing.AllocsPerRun(100, func() { fastRepeatPatch(e) }); n != 1 {
		t.Errorf("the patch of a repeat allocated %v times, want 1", n)
	}
}
