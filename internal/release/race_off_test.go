//go:build !race

package release

// raceFlag is the go command flag that builds a consumer as this test was
// built: nothing, without the race detector.
const raceFlag = ""
