package session

import clock "time"

// Planted: a renamed import of time does not hide a clock read.
func wait(d clock.Duration) <-chan clock.Time { return clock.After(d) }
