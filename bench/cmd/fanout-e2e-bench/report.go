package main

import (
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
)

func splitComma(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" && !yield(f) {
				return
			}
		}
	}
}

// report prints a table per API and the targets.
func report(w io.Writer, o options, rs []result) {
	fmt.Fprintf(w, "Burst of %d events per API (%d pods, %d reasons each) to a real kube-apiserver; median of %d\n\n",
		o.events, o.objects, o.events/o.objects, o.reps)
	fmt.Fprintln(w, "| API | system | on the server after the first call | after the last call | writes/s | lost |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range rs {
		name := r.System
		if r.Writers > 0 {
			name = fmt.Sprintf("fanout, %d writer%s", r.Writers, map[bool]string{true: "", false: "s"}[r.Writers == 1])
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f | %d |\n", r.API, name, ms(r.Wall), ms(r.After), r.PerSec, r.Lost)
	}
	fmt.Fprintln(w)
	for _, t := range targets(rs) {
		fmt.Fprintln(w, t)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// targets checks issue 36's targets for each API.
func targets(rs []result) []string {
	var out []string
	for _, api := range []string{"core/v1", "events.k8s.io/v1"} {
		def, one, cg, ok := pick(rs, api)
		if !ok {
			out = append(out, fmt.Sprintf("%s: not measured (the default, 1 writer and client-go are needed)", api))
			continue
		}
		out = append(out,
			check(def.After <= 2*time.Second, "%s: default on the server within 2 s of the last call: %s", api, ms(def.After)),
			check(def.PerSec >= 4*one.PerSec, "%s: default ≥ 4× the writes/s of one writer: %.1f×", api, def.PerSec/one.PerSec),
			check(def.Lost == 0, "%s: default loses nothing: %d lost", api, def.Lost),
			check(def.Wall < cg.Wall && def.Lost <= cg.Lost, "%s: default ahead of client-go on wall time and lost: %s and %d against %s and %d",
				api, ms(def.Wall), def.Lost, ms(cg.Wall), cg.Lost))
	}
	return out
}

// pick returns fanout's default and one-writer results and client-go's.
func pick(rs []result, api string) (def, one, cg result, ok bool) {
	var haveDef, haveOne, haveCG bool
	for _, r := range rs {
		switch {
		case r.API != api:
		case r.System == "client-go":
			cg, haveCG = r, true
		case r.Writers == record.DefaultWriters:
			def, haveDef = r, true
		case r.Writers == 1:
			one, haveOne = r, true
		}
	}
	return def, one, cg, haveDef && haveOne && haveCG
}

func check(pass bool, format string, args ...any) string {
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	return verdict + "  " + fmt.Sprintf(format, args...)
}
