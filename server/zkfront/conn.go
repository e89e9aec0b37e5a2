package zkfront

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"coord/server/sessions"
	"coord/vocab"
	"coord/zk"
)

// A connection: the handshake (a four-letter word or a connect request),
// then a reader that turns jute requests into the session layer's requests
// (translate.go) handed to Conn.Handle, and a writer that turns the
// session's ordered replies and events into jute (reply.go), with nothing
// in between.

// conn is one ZooKeeper protocol connection with a session.
type conn struct {
	f   *Frontend
	nc  net.Conn
	c   *sessions.Conn
	max int

	stats *connStats // what cons and stat report (stats.go)

	// The writer runs only while there is something to write: it parks
	// when the session's stream is empty and the session layer starts it
	// again (Conn.NextOrPark), so an idle connection has one goroutine,
	// the reader's, not two. wbuf is its encoding buffer, kept between
	// runs while small; writerDone is closed when it has ended for good.
	wbuf       []byte
	writerDone chan struct{}
}

// serveConn serves one accepted connection from ip until it ends.
func (f *Frontend) serveConn(nc net.Conn, ip string) {
	defer nc.Close()
	stats := newConnStats(f.stats, time.Now())
	br := borrowReader(nc)
	fr := &frameReader{nc: nc, br: br}
	handedOff := false // to readLoop, which gives the buffer back
	defer func() {
		if !handedOff {
			fr.release()
		}
	}()
	// The connect request (or a four-letter word) must come within the
	// handshake timeout (ZooKeeper: sessionlessCnxnTimeout, 10 s).
	nc.SetReadDeadline(time.Now().Add(f.cfg.HandshakeTimeout))
	prefix, err := br.Peek(4)
	if err != nil {
		f.handshakeFailed(err)
		return
	}
	if cmd, ok := zk.IsFourLetterWord(prefix); ok {
		f.stats.received.Add(1)
		f.fourLetterWord(nc, cmd)
		f.stats.sent.Add(1)
		return
	}
	frame, err := zk.ReadFrame(br, f.cfg.MaxFrameBytes)
	if err != nil {
		f.handshakeFailed(err)
		return
	}
	stats.packetReceived()
	arrived := time.Now()
	var creq zk.ConnectRequest
	if err := zk.Unmarshal(frame, &creq); err != nil {
		f.log.Info("bad ZooKeeper connect request", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*f.srv.LeaderWait())
	cr := &sessions.ConnectRequest{SessionID: creq.SessionID, Password: creq.Passwd,
		TimeoutMs: creq.TimeOut, LastZxid: creq.LastZxidSeen, ReadOnly: creq.ReadOnly}
	if id, ok := f.srv.X509Identity(connTLSState(nc)); ok {
		cr.Auth = append(cr.Auth, id)
	}
	c, resp, err := f.sess.Connect(ctx, cr, ip)
	cancel()
	if err != nil {
		if errors.Is(err, sessions.ErrSessionExpired) || errors.Is(err, sessions.ErrWrongPassword) {
			// ZooKeeper answers an expired session or a wrong password
			// with a zero session, which clients report as expired.
			refusal := creq.Refusal()
			if _, err := nc.Write(zk.AppendConnectResponse(nil, &refusal)); err == nil {
				stats.packetSent()
			}
		}
		f.log.Info("ZooKeeper connect refused", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	cresp := creq.Response(resp.TimeoutMs, resp.SessionID, resp.Password, resp.ReadOnly)
	if _, err := nc.Write(zk.AppendConnectResponse(nil, &cresp)); err != nil {
		c.Shut(err)
		return
	}
	stats.packetSent()
	if creq.SessionID == 0 {
		// A new session's connect is its createSession request (cxid 0),
		// as ZooKeeper counts it; a re-attach is no request.
		stats.replied(zk.OpCreateSession, 0, resp.Zxid, arrived)
	}
	zc := &conn{f: f, nc: nc, c: c, max: f.cfg.MaxFrameBytes, stats: stats, writerDone: make(chan struct{})}
	f.mu.Lock()
	f.byConn[c] = zc
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.byConn, c)
		f.mu.Unlock()
	}()
	fr.max = zc.max
	handedOff = true
	go zc.writeLoop() // what the connect queued (re-registered watches' events), then it parks
	zc.readLoop(fr, time.Duration(resp.TimeoutMs)*time.Millisecond)
	<-zc.writerDone
}

// readLoop reads requests until the client goes away or sends something
// that ends the connection. A client silent for longer than its session
// timeout is disconnected (its session then expires unless it re-attaches).
func (zc *conn) readLoop(fr *frameReader, timeout time.Duration) {
	defer zc.c.Shut(nil)
	defer fr.release()
	for {
		zc.nc.SetReadDeadline(time.Now().Add(timeout))
		frame, err := fr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				zc.f.log.Debug("ZooKeeper connection read", "session", fmt.Sprintf("0x%x", zc.c.ID()), "err", err)
			}
			return
		}
		arrived := time.Now()
		zc.stats.packetReceived()
		zc.c.Touch()
		h, body, err := zk.DecodeRequest(frame)
		if err != nil && h == (zk.RequestHeader{}) {
			return // not even a header: the stream is beyond saving
		}
		req, t := translate(h, body, err, arrived, zc.f.cfg.SASL)
		zc.c.Handle(req)
		if t.close {
			return
		}
	}
}

// writeLoop sends the session's outbound messages as jute frames until
// none is ready (it parks, and runs again once one is) or the session's
// connection is shut: then it closes the socket, which ends readLoop.
func (zc *conn) writeLoop() {
	if zc.write() {
		return // parked
	}
	zc.nc.Close()
	close(zc.writerDone)
}

// write writes what is ready, batch by batch; parked reports that it
// stopped for want of messages, not because the connection ended.
func (zc *conn) write() (parked bool) {
	var bw *bufio.Writer // borrowed while a batch is written
	defer func() {
		if bw != nil {
			bw.Flush()
			giveWriter(bw)
		}
	}()
	for {
		if bw != nil {
			giveWriter(bw)
			bw = nil
		}
		if cap(zc.wbuf) > maxKeptFrame {
			zc.wbuf = nil // a large reply's buffer is not kept while idle
		}
		msgs, ok, parked := zc.c.NextOrPark(zc.writeLoop)
		if parked {
			return true
		}
		if !ok {
			return false
		}
		bw = borrowWriter(zc.nc)
		for _, m := range msgs {
			buf := zc.wbuf[:0]
			closeAfter := false
			switch m := m.(type) {
			case *sessions.Event:
				buf = zk.AppendEvent(buf, -1, &zk.WatcherEvent{Type: zk.EventType(m.Type), State: m.State, Path: m.Path})
			case *sessions.Reply:
				if m.Err == vocab.ConnectionLoss || m.Err == vocab.SessionMoved {
					// ZooKeeper never sends ConnectionLoss, and answers a
					// request on a connection its session left
					// (SessionMoved) by closing it: the client reports the
					// loss itself.
					bw.Flush()
					zc.c.Shut(nil)
					return false
				}
				t, _ := m.Tag.(replyTag)
				buf = encodeReply(buf, t, m)
				zc.stats.replied(t.op, m.Xid, m.Zxid, t.start)
				closeAfter = t.close || ((t.op == zk.OpAuth || t.op == zk.OpSASL) && m.Err == vocab.AuthFailed)
			default:
				continue
			}
			zc.wbuf = buf
			if _, err := bw.Write(buf); err != nil {
				zc.c.Shut(err)
				return false
			}
			zc.stats.packetSent()
			if closeAfter {
				bw.Flush()
				zc.c.Shut(nil)
				return false
			}
		}
		if err := bw.Flush(); err != nil {
			zc.c.Shut(err)
			return false
		}
		zc.c.Written()
	}
}

// Buffers. A server may hold 100,000 connections, most of them idle but
// for a ping every few seconds, so a connection holds no read or write
// buffer while it waits: the reader waits for the next frame's 4-byte
// length on the socket itself and borrows a 64 KiB buffer from a pool
// for the frame and whatever came with it (pipelined requests), giving it
// back once it has read everything that arrived; the writer borrows one
// for each batch of replies. Before, each connection kept 128 KiB.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
)

// maxKeptFrame is the largest encoding buffer the writer keeps while idle.
const maxKeptFrame = 4 << 10

func borrowReader(nc net.Conn) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(nc)
	return br
}

func borrowWriter(nc net.Conn) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(nc)
	return bw
}

func giveWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}

// frameReader reads frames off a connection, holding a borrowed buffer
// only while frames arrive back to back.
type frameReader struct {
	nc  net.Conn
	br  *bufio.Reader // nil while idle
	max int
}

// next reads the next frame's body.
func (fr *frameReader) next() ([]byte, error) {
	if fr.br != nil && fr.br.Buffered() == 0 {
		fr.release()
	}
	if fr.br != nil {
		return zk.ReadFrame(fr.br, fr.max)
	}
	var prefix [4]byte
	if _, err := io.ReadFull(fr.nc, prefix[:]); err != nil {
		return nil, err
	}
	n, err := zk.FrameLength(prefix[:], fr.max)
	if err != nil {
		return nil, err
	}
	fr.br = borrowReader(fr.nc)
	body := make([]byte, n)
	if _, err := io.ReadFull(fr.br, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// release gives the buffer back (what it holds has been read).
func (fr *frameReader) release() {
	if fr.br != nil {
		fr.br.Reset(nil)
		readers.Put(fr.br)
		fr.br = nil
	}
}
