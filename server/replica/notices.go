package replica

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Commit notices: the short path of a commit from the leader to its
// followers and observers (issue: a reader on a follower should see a write
// another client was just told succeeded, as on ZooKeeper, whose leader
// sends COMMIT before it answers). Each follower keeps one connection of
// the peer plane's channel 'C' to the leader. Before it applies a batch,
// the leader's apply hands the index and term of its last entry to the
// notices' writer, which writes those 16 bytes to every such connection
// while the apply goes on; the follower's reader applies its own log up to
// there at once, on the goroutine that read the notice (fastApply: only if
// its log holds that entry with that term). With FreshFollowers the apply
// writes the notice itself, each follower answers it with a receipt, and
// the apply waits (at most receiptWait) for the receipts of the followers
// that keep up, whose reads wait for the commits they were told of
// (awaitLearned): a read there after an acknowledged write shows it. The
// Commits gRPC stream (commits.go) carries the same positions to a
// follower whose leader does not serve this channel (an older version);
// raft tells of every commit in the end.

// chanNotices is the peer plane's channel of commit notices.
const chanNotices byte = 'C'

// noticeWriteWait bounds the leader's write of one notice to one follower:
// a follower that does not read them (paused, cut off) loses its
// connection rather than slow the leader's apply; it dials again.
const noticeWriteWait = time.Millisecond

// notices is the leader's set of notice connections.
type notices struct {
	// wait: send waits for the followers' receipts (Config.FreshFollowers).
	wait  bool
	mu    sync.Mutex
	conns map[net.Conn]*noticeConn
	buf   [16]byte
	recv  chan struct{} // closed and replaced whenever a receipt arrives

	latest  atomic.Pointer[position] // the position to write next
	written uint64                   // the index last written (under mu)
	kick    chan struct{}            // send's wake-up of run
}

// noticeConn is what the leader knows of one follower's notices.
type noticeConn struct {
	received atomic.Uint64 // the last index the follower said it read
	// lagging: it did not confirm a notice within receiptWait; send does
	// not wait for it again until it confirms the latest one.
	lagging atomic.Bool
}

// receiptWait bounds how long the leader's apply waits for its followers
// to confirm that they read a notice: about a round trip between servers.
// A follower slower than that is not waited for until it catches up.
const receiptWait = time.Millisecond

func (n *notices) add(c net.Conn) *noticeConn {
	nc := &noticeConn{}
	n.mu.Lock()
	if n.conns == nil {
		n.conns = map[net.Conn]*noticeConn{}
		n.recv = make(chan struct{})
	}
	n.conns[c] = nc
	n.mu.Unlock()
	return nc
}

// receipt records that nc's follower read the notice of index.
func (n *notices) receipt(nc *noticeConn, index uint64) {
	nc.received.Store(index)
	n.mu.Lock()
	close(n.recv)
	n.recv = make(chan struct{})
	n.mu.Unlock()
}

func (n *notices) remove(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.Close()
}

// send has p written to every connection. By default the notices' writer
// (run) writes it, so the leader's apply goes on while the notice is on its
// way (written here, before the apply, the notice beat the writer's answer
// to a follower 79 % of the time rather than 60 %, but it cost a single
// session's writes 15 % of their rate on the 2-core test machine). With
// wait (Config.FreshFollowers) send writes it itself and then waits, at
// most receiptWait, until every follower that keeps up has confirmed it
// read p, so that the notice is there before any writer hears of the
// commit.
func (n *notices) send(p position) {
	n.mu.Lock()
	none := len(n.conns) == 0
	n.mu.Unlock()
	if none {
		return
	}
	n.latest.Store(&p)
	if !n.wait {
		select {
		case n.kick <- struct{}{}:
		default:
		}
		return
	}
	n.write()
	var timer *time.Timer
	for {
		n.mu.Lock()
		ch, behind := n.recv, false
		for _, nc := range n.conns {
			got := nc.received.Load()
			if got >= p.index {
				nc.lagging.Store(false)
			} else if !nc.lagging.Load() {
				behind = true
			}
		}
		n.mu.Unlock()
		if !behind {
			return
		}
		if timer == nil {
			timer = time.NewTimer(receiptWait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			n.mu.Lock()
			for _, nc := range n.conns {
				if nc.received.Load() < p.index {
					nc.lagging.Store(true)
				}
			}
			n.mu.Unlock()
			return
		}
	}
}

// run writes the latest position to every connection whenever send asks;
// a connection that cannot take it within noticeWriteWait is closed.
func (n *notices) run(closing <-chan struct{}) {
	for {
		select {
		case <-n.kick:
		case <-closing:
			return
		}
		n.write()
	}
}

// write writes the latest position to every connection it has not been
// written to; a connection that cannot take it within noticeWriteWait is
// closed.
func (n *notices) write() {
	p := n.latest.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	if p == nil || p.index <= n.written {
		return
	}
	n.written = p.index
	binary.BigEndian.PutUint64(n.buf[:8], p.index)
	binary.BigEndian.PutUint64(n.buf[8:], p.term)
	for c := range n.conns {
		c.SetWriteDeadline(time.Now().Add(noticeWriteWait))
		if _, err := c.Write(n.buf[:]); err != nil {
			delete(n.conns, c)
			c.Close()
		}
	}
}

// closeAll drops every connection (this server stopped leading or closes).
func (n *notices) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

// serveNotices takes a follower's notice connection (the peer plane
// authenticated it): a leader keeps it until it breaks or leadership moves;
// any other server closes it at once.
func (r *Replica) serveNotices(c net.Conn) {
	if r.raft == nil || r.raft.State() != raft.Leader {
		c.Close()
		return
	}
	nc := r.fsm.notices.add(c)
	// The follower answers each notice with its index (a receipt).
	go func() {
		defer r.fsm.notices.remove(c)
		var buf [8]byte
		for {
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				return
			}
			r.fsm.notices.receipt(nc, binary.BigEndian.Uint64(buf[:]))
		}
	}()
}

// followNoticesOnce reads one leader's notices until the connection ends
// or raft names another leader. It reports whether it read any (a leader
// that does not serve the channel, an older version, hangs up at once;
// the Commits stream then carries the positions).
func (r *Replica) followNoticesOnce() bool {
	id, addr, ok := r.leaderToFollow()
	if !ok {
		return false
	}
	dctx, dcancel := context.WithTimeout(context.Background(), r.LeaderWait())
	c, err := r.peers.dialChannel(dctx, addr, chanNotices)
	dcancel()
	if err != nil {
		return false
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // hang up when raft names another leader or this server closes
		t := time.NewTicker(r.cfg.RaftTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				c.Close()
				return
			case <-r.closing:
				c.Close()
				return
			case <-t.C:
				if _, now := r.raft.LeaderWithID(); string(now) != id {
					c.Close()
					return
				}
			}
		}
	}()
	var buf [16]byte
	read := false
	defer r.noticesUp.Store(false)
	for {
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			return read
		}
		if !read {
			read = true
			r.noticesUp.Store(true) // the Commits stream steps aside
		}
		p := position{index: binary.BigEndian.Uint64(buf[:8]), term: binary.BigEndian.Uint64(buf[8:])}
		r.noticesRead.Add(1)
		r.fsm.learnCommit(p) // reads from here on wait for it (awaitLearned)
		c.SetWriteDeadline(time.Now().Add(r.cfg.RaftTimeout))
		if _, err := c.Write(buf[:8]); err != nil { // the receipt
			return true
		}
		r.fsm.fastApply(r.logs, p.index, p.term)
	}
}
