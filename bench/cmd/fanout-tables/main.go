// Command fanout-tables prints, in Markdown, the benchmark tables of the
// project's README from the JSON Lines of one fanout-bench run: readers
// that do nothing, readers that work, latency and topics, then the
// targets the run met and missed. `make bench-readme` runs it after the
// full run, so that every table of the README comes from one run.
//
// Usage:
//
//	fanout-tables [FILE]
//
// FILE is the run's JSON Lines (fanout-bench -json), out/bench.json if not
// given; "-" reads standard input. Exit status 1 if the file cannot be
// read or holds no case, 2 for a bad argument.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name := "out/bench.json"
	switch {
	case len(args) > 1, len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		fmt.Fprintln(stderr, "usage: fanout-tables [FILE]   (fanout-bench -json output; default out/bench.json, - for stdin)")
		if len(args) == 1 {
			return 0
		}
		return 2
	case len(args) == 1:
		name = args[0]
	}
	in := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, "fanout-tables:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	cases, err := harness.ReadCases(in)
	if err == nil && len(cases) == 0 {
		err = fmt.Errorf("%s holds no case", name)
	}
	if err == nil {
		err = harness.WriteReadmeTables(stdout, cases)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fanout-tables:", err)
		return 1
	}
	return 0
}
