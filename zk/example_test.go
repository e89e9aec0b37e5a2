package zk_test

import (
	"bytes"
	"fmt"
	"io"

	"coord/vocab"
	"coord/zk"
)

// The server side of a connection: a four-letter word or a handshake, then
// requests answered in order. A bytes.Buffer stands in for the socket.
func Example() {
	// What a client sends: the handshake (as go-zookeeper, without the
	// readOnly byte), then getData("/a", watch) with xid 1.
	var in bytes.Buffer
	in.Write(zk.AppendFrame(nil, &zk.ConnectRequest{TimeOut: 30000, Passwd: make([]byte, zk.PasswordLen)}))
	in.Write(zk.AppendRequest(nil, zk.RequestHeader{Xid: 1, Type: zk.OpGetData},
		&zk.GetDataRequest{Path: "/a", Watch: true}))

	var first [4]byte
	if _, err := io.ReadFull(&in, first[:]); err != nil {
		panic(err)
	}
	if cmd, ok := zk.IsFourLetterWord(first[:]); ok {
		fmt.Println("four-letter word", cmd)
		return
	}
	n, err := zk.FrameLength(first[:], zk.DefaultMaxFrame)
	if err != nil {
		panic(err)
	}
	var req zk.ConnectRequest
	if err := zk.Unmarshal(in.Next(n), &req); err != nil {
		panic(err)
	}
	resp := req.Response(30000, 0x100000001, bytes.Repeat([]byte{7}, zk.PasswordLen), false)
	out := zk.AppendConnectResponse(nil, &resp)
	fmt.Printf("session %#x, readOnly byte sent: %v, %d bytes\n", resp.SessionID, resp.HasReadOnly, len(out))

	frame, err := zk.ReadFrame(&in, zk.DefaultMaxFrame)
	if err != nil {
		panic(err)
	}
	h, body, err := zk.DecodeRequest(frame)
	if err != nil { // answer the xid with MarshallingError or Unimplemented
		fmt.Println(len(zk.AppendReply(out, zk.ReplyHeader{Xid: h.Xid, Zxid: 5, Err: zk.CodeOf(err)}, nil)))
		return
	}
	get := body.(*zk.GetDataRequest)
	fmt.Println(h.Type, get.Path, get.Watch)
	out = zk.AppendReply(out, zk.ReplyHeader{Xid: h.Xid, Zxid: 5},
		&zk.GetDataResponse{Data: []byte("v"), Stat: vocab.Stat{Czxid: 3, Mzxid: 3, DataLength: 1}})
	fmt.Println(len(out), "bytes out")
	// Output:
	// session 0x100000001, readOnly byte sent: false, 40 bytes
	// getData /a true
	// 133 bytes out
}
