package zk

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"coord/vocab"
)

// Golden bytes, computed by hand from zookeeper.jute (not by this package).

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenConnectRequest(t *testing.T) {
	// go-zookeeper's first handshake: protocol 0, lastZxid 0, timeout
	// 30000 ms, session 0, a 16-byte zero password, no readOnly byte.
	goZK := unhex(t, `0000002c
		00000000 0000000000000000 00007530 0000000000000000
		00000010 00000000000000000000000000000000`)
	// The Java client re-attaching: lastZxid 0x100000005, session
	// 0x1000000ab, password 0x01..0x10, readOnly false.
	java := unhex(t, `0000002d
		00000000 0000000100000005 00007530 00000001000000ab
		00000010 0102030405060708090a0b0c0d0e0f10 00`)

	for _, c := range []struct {
		name string
		wire []byte
		want ConnectRequest
	}{
		{"go-zookeeper", goZK, ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16)}},
		{"java", java, ConnectRequest{LastZxidSeen: 0x100000005, TimeOut: 30000, SessionID: 0x1000000ab,
			Passwd: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, HasReadOnly: true}},
	} {
		body, err := ReadFrame(bytes.NewReader(c.wire), DefaultMaxFrame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got ConnectRequest
		if err := Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got.Passwd, c.want.Passwd) || got.TimeOut != c.want.TimeOut ||
			got.SessionID != c.want.SessionID || got.LastZxidSeen != c.want.LastZxidSeen ||
			got.HasReadOnly != c.want.HasReadOnly || got.ReadOnly {
			t.Errorf("%s: got %+v want %+v", c.name, got, c.want)
		}
		if enc := AppendFrame(nil, &c.want); !bytes.Equal(enc, c.wire) {
			t.Errorf("%s: encoded\n% x\nwant\n% x", c.name, enc, c.wire)
		}

		// The answer carries the readOnly byte only for the Java client.
		resp := got.Response(30000, 0x1000000ab, bytes.Repeat([]byte{0xaa}, 16), false)
		want := "00000000 00007530 00000001000000ab 00000010 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		length := "00000024"
		if got.HasReadOnly {
			want += " 00"
			length = "00000025"
		}
		if enc := AppendConnectResponse(nil, &resp); !bytes.Equal(enc, unhex(t, length+want)) {
			t.Errorf("%s: response\n% x\nwant %s %s", c.name, enc, length, want)
		}
	}
}

func TestGoldenReplyHeader(t *testing.T) {
	// xid 1, zxid 0x100000003, err NoNode (-101 = 0xffffff9b), no body.
	want := unhex(t, "00000010 00000001 0000000100000003 ffffff9b")
	got := AppendReply(nil, ReplyHeader{Xid: 1, Zxid: 0x100000003, Err: vocab.NoNode}, nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x want % x", got, want)
	}
	// A ping reply: xid -2.
	want = unhex(t, "00000010 fffffffe 0000000000000009 00000000")
	if got := AppendReply(nil, ReplyHeader{Xid: XidPing, Zxid: 9}, nil); !bytes.Equal(got, want) {
		t.Fatalf("ping: got % x want % x", got, want)
	}
}

func TestGoldenNotification(t *testing.T) {
	// xid -1, zxid -1 (as ZooKeeper 3.8 sends), NodeDataChanged (3),
	// SyncConnected (3), path "/a".
	want := unhex(t, "0000001e ffffffff ffffffffffffffff 00000000 00000003 00000003 00000002 2f61")
	ev := WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/a"}
	if got := AppendEvent(nil, -1, &ev); !bytes.Equal(got, want) {
		t.Fatalf("got % x want % x", got, want)
	}
}

func TestGoldenMulti(t *testing.T) {
	// A multi of create("/a", "x", world:anyone ALL, persistent) and
	// delete("/b", -1), as request xid 5.
	wire := unhex(t, `
		00000005 0000000e
		00000001 00 ffffffff
		00000002 2f61 00000001 78 00000001 0000001f 00000005 776f726c64 00000006 616e796f6e65 00000000
		00000002 00 ffffffff
		00000002 2f62 ffffffff
		ffffffff 01 ffffffff`)
	h, body, err := DecodeRequest(wire)
	if err != nil || h.Xid != 5 || h.Type != OpMulti {
		t.Fatalf("DecodeRequest: %v %+v", err, h)
	}
	want := &MultiRequest{Ops: []MultiOp{
		{Type: OpCreate, Path: "/a", Data: []byte("x"), ACL: vocab.OpenACLUnsafe, Flags: vocab.ModePersistent},
		{Type: OpDelete, Path: "/b", Version: -1},
	}}
	got := body.(*MultiRequest)
	if len(got.Ops) != 2 || got.Ops[0].Path != "/a" || string(got.Ops[0].Data) != "x" ||
		got.Ops[0].ACL[0] != vocab.OpenACLUnsafe[0] || got.Ops[1].Path != "/b" || got.Ops[1].Version != -1 {
		t.Fatalf("decoded %+v", got)
	}
	if enc := AppendRequest(nil, RequestHeader{Xid: 5, Type: OpMulti}, want)[4:]; !bytes.Equal(enc, wire) {
		t.Fatalf("encoded\n% x\nwant\n% x", enc, wire)
	}

	// Its failure: the create failed with NodeExists (-110 = 0xffffff92),
	// the delete was not tried (RuntimeInconsistency, -2). The reply
	// header's err is OK.
	resp := MultiFailure(2, 0, vocab.NodeExists)
	wantResp := unhex(t, `00000033
		00000005 0000000100000009 00000000
		ffffffff 00 ffffff92 ffffff92
		ffffffff 00 fffffffe fffffffe
		ffffffff 01 ffffffff`)
	if enc := AppendReply(nil, ReplyHeader{Xid: 5, Zxid: 0x100000009}, &resp); !bytes.Equal(enc, wantResp) {
		t.Fatalf("response\n% x\nwant\n% x", enc, wantResp)
	}
}

func TestGoldenGetChildren2Response(t *testing.T) {
	// children ["a"], a zero Stat except numChildren 1.
	wire := unhex(t, `00000001 00000001 61
		0000000000000000 0000000000000000 0000000000000000 0000000000000000
		00000000 00000000 00000000 0000000000000000 00000000 00000001 0000000000000000`)
	r := GetChildren2Response{Children: []string{"a"}, Stat: vocab.Stat{NumChildren: 1}}
	if enc := Marshal(&r); !bytes.Equal(enc, wire) {
		t.Fatalf("got % x\nwant % x", enc, wire)
	}
	if len(wire)-9 != StatSize {
		t.Fatalf("stat is %d bytes", len(wire)-9)
	}
}
