package session

import (
	"fmt"
	"math"
	"time"
)

// maxTimeout is the longest timeout the wire can carry: ZooKeeper's connect
// request holds the timeout as a signed 32-bit count of milliseconds.
const maxTimeout = time.Duration(math.MaxInt32) * time.Millisecond

// Bounds are the server's limits on session timeouts. Tick is the server's
// tick (ZooKeeper's tickTime): the granularity of expiry. Min and Max bound the
// timeout a client can negotiate.
type Bounds struct {
	Tick time.Duration
	Min  time.Duration
	Max  time.Duration
}

// DefaultBounds returns ZooKeeper's defaults for a given tick: a minimum of two
// ticks and a maximum of twenty.
func DefaultBounds(tick time.Duration) Bounds {
	return Bounds{Tick: tick, Min: 2 * tick, Max: 20 * tick}
}

// Validate reports the first field that is out of range. Min and Max must be
// whole milliseconds that fit the wire's int32, because Negotiate works in the
// client's unit (milliseconds) and a fraction would be silently dropped.
func (b Bounds) Validate() error {
	if b.Tick <= 0 {
		return fmt.Errorf("session: Bounds.Tick must be > 0, got %v", b.Tick)
	}
	if err := checkMillis("Min", b.Min); err != nil {
		return err
	}
	if err := checkMillis("Max", b.Max); err != nil {
		return err
	}
	if b.Max < b.Min {
		return fmt.Errorf("session: Bounds.Max must be >= Bounds.Min (%v), got %v", b.Min, b.Max)
	}
	return nil
}

func checkMillis(field string, d time.Duration) error {
	if d < time.Millisecond || d > maxTimeout {
		return fmt.Errorf("session: Bounds.%s must be in [1ms, %v], got %v", field, maxTimeout, d)
	}
	if d%time.Millisecond != 0 {
		return fmt.Errorf("session: Bounds.%s must be a whole number of milliseconds, got %v", field, d)
	}
	return nil
}

// Negotiate returns the timeout, in milliseconds, that a client asking for
// requestedMs gets. Like ZooKeeper's processConnectRequest it raises the
// request to Min and then lowers it to Max; zero and negative requests
// therefore get Min. It assumes Validate passed (with Min > Max the result
// would be Max, as in ZooKeeper).
func (b Bounds) Negotiate(requestedMs int32) int32 {
	minMs := int32(b.Min / time.Millisecond)
	maxMs := int32(b.Max / time.Millisecond)
	t := requestedMs
	if t < minMs {
		t = minMs
	}
	if t > maxMs {
		t = maxMs
	}
	return t
}
