package harness

import (
	"bytes"
	"strings"
	"testing"
)

// Every system of the working group delivers every value to every reader
// in order, and each reader checks it: none is found out of order.
func TestWorkingReadersGetEveryValueInOrder(t *testing.T) {
	const n, events = 3, 2*orderedMask/3 + 7 // the sequence wraps in the long run of a pair
	for _, s := range WorkingSystems() {
		smp, err := measure(variant{sys: s, ordered: true}, n, 1, events)
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		if smp.delivered != n*events || smp.broken != 0 || !smp.settled {
			t.Errorf("%s: delivered %d of %d, %d out of order, settled %v", s.Label(), smp.delivered, n*events, smp.broken, smp.settled)
		}
		if smp.cpu <= 0 {
			t.Errorf("%s: CPU time %v", s.Label(), smp.cpu)
		}
	}
}

// The order check counts each value that is not the one expected, goes on
// from the value seen, and follows the sequence round the pool.
func TestOrderCountsValuesOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		stamps []int64
		broken int64
	}{
		{[]int64{0, 1, 2, 3}, 0},
		{[]int64{0, 1, 3, 4}, 1},     // one lost
		{[]int64{0, 2, 1, 3}, 3},     // two swapped: 2, then 1, then 3
		{[]int64{0, 1, 1, 2}, 1},     // one repeated
		{[]int64{5}, 1},              // not the first
		{[]int64{0, orderedMask}, 1}, // a jump to the end
	} {
		var o order
		for _, s := range tc.stamps {
			o.see(s)
		}
		if o.broken != tc.broken {
			t.Errorf("%v: %d out of order, want %d", tc.stamps, o.broken, tc.broken)
		}
	}
	o := order{want: orderedMask}
	o.see(orderedMask)
	o.see(0)
	if o.broken != 0 {
		t.Errorf("the sequence round the pool: %d out of order", o.broken)
	}
}

// A reader that checks the order records no latency, and the order of
// several producers' values is not defined.
func TestWorkingReadersNeedOneProducerAndNoRecorder(t *testing.T) {
	if _, err := measure(variant{sys: Fanout(StrategyWait, APIPull), ordered: true}, 2, 2, 100); err == nil {
		t.Error("working readers with 2 producers: no error")
	}
	if _, err := Fanout(StrategyWait, APIPull).startWith(2, setup{ordered: true, rec: &recorder{}}); err == nil {
		t.Error("a reader both checking the order and recording latency: no error")
	}
}

// The working group's cases carry their ratio against fanout wait pull
// and limit, CPU per delivery and no value out of order; the report shows
// them as tables of a row per N.
func TestWorkingGroupReportsRatiosCPUAndOrder(t *testing.T) {
	res := runTiny(t)
	got := casesOf(res.Cases, KindWorking)
	if len(got) != len(WorkingSystems())*len(tinyConfig().WorkingWatchers) {
		t.Fatalf("%d working cases", len(got))
	}
	cpu := 0
	for _, c := range got {
		if c.RatioVsFanout == nil || c.RatioVsLimit == nil || c.OutOfOrder == nil ||
			*c.OutOfOrder != 0 || *c.DeliveredPerSec <= 0 || c.Producers != 1 {
			t.Errorf("%s N=%d: %+v", c.Label, c.Watchers, c)
		}
		// The tiny run's pairs last microseconds: the CPU clock may not
		// tell a case's two runs apart (null), but never goes backwards.
		if c.CPUNsPerDelivered != nil {
			cpu++
			if *c.CPUNsPerDelivered < 0 {
				t.Errorf("%s: %v ns of CPU per delivery", c.Label, *c.CPUNsPerDelivered)
			}
		}
		if is(&c, FanoutAtDefaultQueue) && *c.RatioVsFanout != 1 {
			t.Errorf("fanout wait pull at its default queue against itself: %v", *c.RatioVsFanout)
		}
	}
	if cpu == 0 {
		t.Error("no working case measured its CPU per delivery")
	}
	var b strings.Builder
	if err := reportWorking(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== working readers: 1 producer", "disruptor q128", "cskr q100", "kelindar q50000",
		"== working readers: process CPU per delivered value", "values out of order, every system and run: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// fanout against kelindar and go-disruptor with working readers: the
// slower ratio, named, at each N; and against limit at N=1.
func TestWorkingTargets(t *testing.T) {
	work := func(s System, n int, vsFanout float64) Case {
		c := newCase(KindWorking, s)
		c.Watchers, c.Producers, c.RatioVsFanout = n, 1, ptr(vsFanout)
		return c
	}
	cases := []Case{work(Kelindar, 1, 0.5), work(Disruptor, 1, 0.25), work(workingLimit(), 1, 1.25),
		work(Kelindar, 10, 1.6), work(Disruptor, 10, 0.5)}
	want := map[string]string{
		"working readers, N=1: fanout wait pull / kelindar, disruptor (each at its default settings)":    Pass + " 2.00× (kelindar q50000)",
		"working readers, N=10: fanout wait pull / kelindar, disruptor (each at its default settings)":   Fail + " 0.62× (kelindar q50000)",
		"working readers, N=100: fanout wait pull / kelindar, disruptor (each at its default settings)":  NA + " -",
		"working readers, N=1000: fanout wait pull / kelindar, disruptor (each at its default settings)": NA + " -",
		"working readers, N=1: fanout wait pull / limit (the same queue length)":                         Fail + " 0.80×",
	}
	got := workingTargets(cases)
	if len(got) != len(want) {
		t.Fatalf("%d targets: %+v", len(got), got)
	}
	for _, tg := range got {
		if w, ok := want[tg.Name]; !ok || w != tg.Status+" "+tg.Measured {
			t.Errorf("%s: %s %s, want %q", tg.Name, tg.Status, tg.Measured, w)
		}
	}
	var b bytes.Buffer
	if err := WriteReport(&b, &Results{Targets: got}); err != nil || !strings.Contains(b.String(), "working readers, N=10") {
		t.Errorf("report: %v\n%s", err, b.String())
	}
}
