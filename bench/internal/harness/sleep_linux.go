package harness

import (
	"syscall"
	"time"
)

// sleepFine sleeps for about d, to within some tens of microseconds: it is
// a nanosleep system call on the calling thread, where time.Sleep lasts at
// least about a millisecond on Linux.
func sleepFine(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
