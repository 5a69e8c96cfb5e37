//go:build !linux

package harness

import "time"

// sleepFine sleeps for about d. Outside Linux it is time.Sleep.
func sleepFine(d time.Duration) { time.Sleep(d) }
