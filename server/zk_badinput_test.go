package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"coord/vocab"
	"coord/zk"
)

// rawZK is a bare ZooKeeper-protocol connection for bad-input tests.
type rawZK struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialZK(t *testing.T, addr string) *rawZK {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawZK{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawZK) connect(req zk.ConnectRequest) zk.ConnectResponse {
	r.t.Helper()
	if _, err := r.nc.Write(zk.AppendFrame(nil, &req)); err != nil {
		r.t.Fatal(err)
	}
	frame, err := zk.ReadFrame(r.br, zk.DefaultMaxFrame)
	if err != nil {
		r.t.Fatalf("reading connect response: %v", err)
	}
	var resp zk.ConnectResponse
	if err := zk.Unmarshal(frame, &resp); err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func (r *rawZK) reply() (zk.ReplyHeader, []byte) {
	r.t.Helper()
	frame, err := zk.ReadFrame(r.br, zk.DefaultMaxFrame)
	if err != nil {
		r.t.Fatalf("reading reply: %v", err)
	}
	var h zk.ReplyHeader
	d := zk.NewDecoder(frame)
	if err := h.Decode(d); err != nil {
		r.t.Fatal(err)
	}
	return h, frame
}

// closed reports whether the server closed the connection.
func (r *rawZK) closed() bool {
	r.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := r.br.ReadByte()
	return errors.Is(err, io.EOF)
}

// Bad input on the ZooKeeper port gets ZooKeeper's answer and never
// disturbs other sessions: an oversize frame or garbage instead of a
// connect request closes the connection; an unknown op is answered
// Unimplemented and closes it; a body that does not decode is answered
// MarshallingError; a wrong password gets a refused (zero) session.
func TestZooKeeperBadInput(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	addr := c.Servers[0].ZKAddr()
	good := dialZK(t, addr)
	gresp := good.connect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
	if gresp.SessionID == 0 || gresp.TimeOut == 0 || !gresp.HasReadOnly {
		t.Fatalf("connect: %+v", gresp)
	}

	t.Run("oversize frame", func(t *testing.T) {
		r := dialZK(t, addr)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], 0x7fffffff)
		r.nc.Write(b[:])
		if !r.closed() {
			t.Fatal("connection not closed")
		}
	})
	t.Run("garbage before connect", func(t *testing.T) {
		r := dialZK(t, addr)
		r.nc.Write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5})
		if !r.closed() {
			t.Fatal("connection not closed")
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		r := dialZK(t, addr)
		resp := r.connect(zk.ConnectRequest{TimeOut: 10000, SessionID: gresp.SessionID, Passwd: []byte("0123456789abcdef")})
		if resp.SessionID != 0 || resp.TimeOut != 0 {
			t.Fatalf("wrong password accepted: %+v", resp)
		}
	})
	t.Run("unknown op", func(t *testing.T) {
		r := dialZK(t, addr)
		r.connect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
		r.nc.Write(zk.AppendRequest(nil, zk.RequestHeader{Xid: 1, Type: 999}, nil))
		h, _ := r.reply()
		if h.Xid != 1 || h.Err != vocab.Unimplemented {
			t.Fatalf("reply %+v", h)
		}
		if !r.closed() {
			t.Fatal("connection not closed after an unknown op")
		}
	})
	t.Run("malformed body", func(t *testing.T) {
		r := dialZK(t, addr)
		r.connect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
		// A getData whose path length runs past the frame.
		frame := zk.AppendRequest(nil, zk.RequestHeader{Xid: 1, Type: zk.OpGetData}, nil)
		frame = append(frame, 0, 0, 1, 0, 'x')
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		r.nc.Write(frame)
		h, _ := r.reply()
		if h.Xid != 1 || h.Err != vocab.MarshallingError {
			t.Fatalf("reply %+v", h)
		}
		// The connection still works.
		r.nc.Write(zk.AppendRequest(nil, zk.RequestHeader{Xid: 2, Type: zk.OpExists}, &zk.ExistsRequest{Path: "/zookeeper"}))
		if h, _ := r.reply(); h.Xid != 2 || h.Err != vocab.OK {
			t.Fatalf("exists after a malformed request: %+v", h)
		}
	})

	// The good session never noticed.
	good.nc.Write(zk.AppendRequest(nil, zk.RequestHeader{Xid: 1, Type: zk.OpCreate},
		&zk.CreateRequest{Path: "/still-fine", ACL: vocab.OpenACLUnsafe}))
	if h, _ := good.reply(); h.Xid != 1 || h.Err != vocab.OK {
		t.Fatalf("create on the good session: %+v", h)
	}
}
