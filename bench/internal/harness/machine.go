package harness

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes the machine and Go runtime a run measured.
type Machine struct {
	// GOOS and GOARCH are the target's, as in package runtime.
	GOOS, GOARCH string
	// NumCPU and GOMAXPROCS are runtime.NumCPU() and runtime.GOMAXPROCS(0).
	NumCPU     int
	GOMAXPROCS int
	// GoVersion is runtime.Version().
	GoVersion string
	// CPUModel is the first "model name" of /proc/cpuinfo, or "" where
	// there is none.
	CPUModel string
}

// DescribeMachine returns the current machine's description.
func DescribeMachine() Machine {
	return Machine{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(),
		CPUModel:  cpuModel("/proc/cpuinfo"),
	}
}

// String renders the machine on one line.
func (m Machine) String() string {
	s := fmt.Sprintf("machine: %s/%s, NumCPU=%d, GOMAXPROCS=%d, %s", m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS, m.GoVersion)
	if m.CPUModel != "" {
		s += ", CPU: " + m.CPUModel
	}
	return s
}

// cpuModel reads the first "model name" line of a cpuinfo file.
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
