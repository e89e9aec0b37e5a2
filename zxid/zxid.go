// Package zxid defines coord's transaction id: a 64-bit number whose high 32
// bits are the epoch and whose low 32 bits count transactions within it, as in
// ZooKeeper. It also holds the rule that turns the raft term of each committed
// entry into the next zxid (Clock).
//
// Invariants kept here:
//   - zxids handed out by one Clock strictly increase;
//   - an entry from a newer raft term starts a new epoch with counter 1;
//   - a counter that would pass 2^32-1 starts a new epoch (ZooKeeper forces a
//     leader election there, ZOOKEEPER-2789; coord does it inside apply);
//   - epochs only grow and follow raft terms in order, but need not equal them.
package zxid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Zxid is a ZooKeeper transaction id: epoch<<32 | counter.
type Zxid int64

// MaxCounter is the largest counter an epoch can hold.
const MaxCounter = 1<<32 - 1

// New builds a zxid from an epoch and a counter.
func New(epoch, counter uint32) Zxid {
	return Zxid(int64(epoch)<<32 | int64(counter))
}

// Epoch returns the high 32 bits.
func (z Zxid) Epoch() uint32 { return uint32(uint64(z) >> 32) }

// Counter returns the low 32 bits.
func (z Zxid) Counter() uint32 { return uint32(uint64(z)) }

// Compare returns -1, 0 or +1 as z is before, equal to or after o.
func (z Zxid) Compare(o Zxid) int {
	switch {
	case z < o:
		return -1
	case z > o:
		return 1
	}
	return 0
}

// String formats the zxid as ZooKeeper prints it: "0x" and lower-case hex
// without leading zeros (Long.toHexString), e.g. 0x100000003.
func (z Zxid) String() string {
	return "0x" + strconv.FormatUint(uint64(z), 16)
}

// ErrSyntax is returned by Parse for a string that is not a zxid.
var ErrSyntax = errors.New("zxid: invalid syntax")

// Parse reads a zxid in the form String produces ("0x" and hex digits, either
// case) or as a plain decimal number.
func Parse(s string) (Zxid, error) {
	var (
		v   uint64
		err error
	)
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		if rest == "" || len(rest) > 16 {
			return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
		}
		v, err = strconv.ParseUint(rest, 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return Zxid(v), nil
}

// Clock derives zxids from the raft terms of committed entries. It is plain
// data so that the state machine can save it in snapshots; its zero value
// hands out 0x100000001 for the first entry of any term.
type Clock struct {
	Epoch    uint32 // epoch of the last zxid handed out
	Counter  uint32 // counter of the last zxid handed out
	LastTerm uint64 // raft term of the last entry seen
}

// Next returns the zxid of the next committed entry, which raft committed in
// term. A term older than one already seen (which raft never produces for
// committed entries) keeps the current epoch, so zxids still increase.
func (c *Clock) Next(term uint64) Zxid {
	switch {
	case c.Epoch == 0 || term > c.LastTerm:
		c.Epoch++
		c.Counter = 1
		if term > c.LastTerm {
			c.LastTerm = term
		}
	case c.Counter == MaxCounter:
		c.Epoch++
		c.Counter = 1
	default:
		c.Counter++
	}
	return New(c.Epoch, c.Counter)
}

// Last returns the last zxid handed out (0 before the first).
func (c *Clock) Last() Zxid {
	if c.Epoch == 0 {
		return 0
	}
	return New(c.Epoch, c.Counter)
}
