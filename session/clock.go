package session

import "time"

// Clock is the only source of time for this package. Expiry decisions are made
// by the leader before anything reaches the log, and tests must be able to
// drive them step by step, so nothing here reads time.Now directly.
type Clock interface {
	Now() time.Time
}

// SystemClock reads the machine's clock. Its times carry Go's monotonic
// reading, so durations the Tracker measures between them are immune to wall
// clock steps (ZooKeeper uses System.nanoTime for the same reason).
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
