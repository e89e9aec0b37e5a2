package session

import "time"

type SystemClock struct{}

// Not planted: the one allowed clock read.
func (SystemClock) Now() time.Time { return time.Now() }

// Planted: another method of SystemClock is not exempt.
func (c *SystemClock) Later() time.Time { return time.Now().Add(time.Second) }

// Planted: a plain function.
func age(t time.Time) time.Duration { return time.Since(t) }
