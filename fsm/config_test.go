package fsm

import (
	"bytes"
	"coord/vocab"
	"fmt"
	"testing"
)

// TestSetConfig: CmdSetConfig writes the lines and version=<zxid in hex>
// to /zookeeper/config as a setData would, checks the expected version
// (reconfig's fromConfig), fires NodeDataChanged, survives encoding and a
// snapshot, and is refused inside a multi.
func TestSetConfig(t *testing.T) {
	f := New()
	lines := []byte("server.1=127.0.0.1:7000:7001:participant;127.0.0.1:2181\n")
	setCfg := func(data []byte, want int64) (Result, []Trigger) {
		c := &Command{Type: CmdSetConfig, Time: 5, Op: Op{Type: CmdSetConfig, Path: "/zookeeper/config", Data: data, TTL: want}}
		dec, err := DecodeCommand(c.Encode(nil))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		return f.Apply(1, dec)
	}
	res, trig := setCfg(lines, 0)
	if res.Err != nil {
		t.Fatalf("first config: %v", res.Err)
	}
	data, st, err := f.View().GetData("/zookeeper/config", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%sversion=%x", lines, int64(res.Zxid))
	if string(data) != want || st.Version != 1 || st.Mzxid != int64(res.Zxid) || ConfigVersion(st) != int64(res.Zxid) {
		t.Fatalf("config = %q %+v, want %q version 1", data, st, want)
	}
	if !bytes.Equal(ConfigLines(data), lines) {
		t.Fatalf("ConfigLines = %q", ConfigLines(data))
	}
	if len(trig) != 1 || trig[0].Path != "/zookeeper/config" || trig[0].Type != vocab.EventNodeDataChanged {
		t.Fatalf("triggers = %+v", trig)
	}
	// A stale fromConfig: BadVersion, nothing changes.
	if res2, _ := setCfg([]byte("x\n"), 0); vocab.CodeOf(res2.Err) != vocab.BadVersion {
		t.Fatalf("stale version: %v, want BadVersion", res2.Err)
	}
	if res3, _ := setCfg([]byte("y\n"), int64(res.Zxid)); res3.Err != nil {
		t.Fatalf("current version: %v", res3.Err)
	}
	if res4, _ := setCfg([]byte("z\n"), -1); res4.Err != nil {
		t.Fatalf("any version: %v", res4.Err)
	}
	data, _, _ = f.View().GetData("/zookeeper/config", nil)
	if !bytes.HasPrefix(data, []byte("z\nversion=")) {
		t.Fatalf("config = %q", data)
	}
	// Another path: BadArguments. In a multi: BadArguments.
	bad, _ := f.Apply(1, &Command{Type: CmdSetConfig, Op: Op{Type: CmdSetConfig, Path: "/a", TTL: -1}})
	if vocab.CodeOf(bad.Err) != vocab.BadArguments {
		t.Fatalf("other path: %v", bad.Err)
	}
	m, _ := f.Apply(1, &Command{Type: CmdMulti, Ops: []Op{{Type: CmdSetConfig, Path: "/zookeeper/config", TTL: -1}}})
	if vocab.CodeOf(m.Err) != vocab.BadArguments {
		t.Fatalf("in multi: %v", m.Err)
	}
	// A snapshot carries it.
	var buf bytes.Buffer
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if g.View().Digest() != f.View().Digest() {
		t.Fatal("restored state differs")
	}
}
