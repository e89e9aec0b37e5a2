package zkfront

import (
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"coord/zk"
)

// The numbers ZooKeeper's srvr, stat, cons and mntr report, kept as
// ZooKeeper keeps them (ServerStats, ServerCnxn): they describe this
// server's ZooKeeper port, its connections, packets and requests (gRPC
// sessions are not counted). A packet is a frame either way: the connect
// request and response, every request, reply and notification, and a
// four-letter word and its answer. A request's latency runs from its
// arrival to its reply being written; a new session's connect counts as a
// request ("SESS"), as in ZooKeeper. srst resets the server's numbers,
// crst every connection's.

// latency is ZooKeeper's AvgMinMaxCounter of request latencies in ms.
type latency struct {
	count, total, min, max int64 // min: math.MaxInt64 before any
}

func newLatency() latency { return latency{min: math.MaxInt64} }

func (l *latency) add(ms int64) {
	l.count++
	l.total += ms
	l.min = min(l.min, ms)
	l.max = max(l.max, ms)
}

// minimum is 0 before any request, as ZooKeeper prints it.
func (l *latency) minimum() int64 {
	if l.count == 0 {
		return 0
	}
	return l.min
}

// average rounds to 4 decimals, as ZooKeeper's server-wide average.
func (l *latency) average() float64 {
	if l.count == 0 {
		return 0
	}
	return math.Round(float64(l.total)/float64(l.count)*10000) / 10000
}

// serverStats are the server-wide numbers (ZooKeeper's ServerStats).
type serverStats struct {
	received, sent atomic.Int64
	mu             sync.Mutex
	lat            latency
}

func newServerStats() *serverStats { return &serverStats{lat: newLatency()} }

func (st *serverStats) latency() latency {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lat
}

// reset is srst.
func (st *serverStats) reset() {
	st.received.Store(0)
	st.sent.Store(0)
	st.mu.Lock()
	st.lat = newLatency()
	st.mu.Unlock()
}

// connStats are one connection's numbers (ZooKeeper's ServerCnxn stats).
type connStats struct {
	server         *serverStats
	established    time.Time
	received, sent atomic.Int64

	mu       sync.Mutex
	lastOp   string // "NA" before any reply
	lastCxid int64  // -1 before any request with an xid of its own
	lastZxid int64  // -1 before any reply
	lastResp time.Time
	lastLat  int64 // ms
	lat      latency
}

func newConnStats(server *serverStats, established time.Time) *connStats {
	c := &connStats{server: server, established: established}
	c.reset()
	return c
}

// reset is crst for this connection.
func (c *connStats) reset() {
	c.received.Store(0)
	c.sent.Store(0)
	c.mu.Lock()
	c.lastOp, c.lastCxid, c.lastZxid, c.lastResp, c.lastLat, c.lat = "NA", -1, -1, time.Time{}, 0, newLatency()
	c.mu.Unlock()
}

// packetReceived and packetSent count a frame on this connection and the
// server.
func (c *connStats) packetReceived() { c.received.Add(1); c.server.received.Add(1) }
func (c *connStats) packetSent()     { c.sent.Add(1); c.server.sent.Add(1) }

// replied records the reply to a request that arrived at start
// (ServerCnxn.updateStatsForResponse): a special xid (a ping's, an auth's)
// leaves lcxid as it was.
func (c *connStats) replied(op zk.OpCode, xid, zxid int64, start time.Time) {
	now := time.Now()
	ms := now.Sub(start).Milliseconds()
	c.mu.Lock()
	if xid >= 0 {
		c.lastCxid = xid
	}
	c.lastOp, c.lastZxid, c.lastResp, c.lastLat = zk.LastOpName(op), zxid, now, ms
	c.lat.add(ms)
	c.mu.Unlock()
	c.server.mu.Lock()
	c.server.lat.add(ms)
	c.server.mu.Unlock()
}

// cons is what cons prints of the connection (stat: the brief part).
// lresp is, as in ZooKeeper, on a monotonic clock whose origin means
// nothing (coord: milliseconds since the server started): it is to be
// compared with other lresp values of the same server only.
func (c *connStats) cons(addr net.Addr, sessionID int64, timeout time.Duration, queued int, started time.Time) zk.ConnStats {
	cs := zk.ConnStats{RemoteAddr: addr.String(), InterestOps: 1, Queued: int64(queued),
		Received: c.received.Load(), Sent: c.sent.Load(), SessionID: sessionID,
		Established: c.established.UnixMilli(), Timeout: int32(timeout.Milliseconds())}
	c.mu.Lock()
	defer c.mu.Unlock()
	cs.LastOp, cs.LastCxid, cs.LastZxid, cs.LastLatency = c.lastOp, c.lastCxid, c.lastZxid, c.lastLat
	if !c.lastResp.IsZero() {
		cs.LastResp = c.lastResp.Sub(started).Milliseconds()
	}
	cs.MinLatency, cs.MaxLatency = c.lat.minimum(), c.lat.max
	if c.lat.count > 0 {
		cs.AvgLatency = c.lat.total / c.lat.count // an integer, as ZooKeeper's
	}
	return cs
}
