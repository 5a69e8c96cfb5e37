package harness

import "time"

// SleepFine sleeps for about d, to within some tens of microseconds on
// Linux (see sleepFine): for the pacing of other groups' latency
// measurements (natsbench).
func SleepFine(d time.Duration) { sleepFine(d) }
