package fsm

import (
	"bytes"
	"coord/vocab"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// sampleCommands has every command type with ordinary and extreme field
// values. Encode must round-trip each.
func sampleCommands() []Command {
	const sid = 0x100000001
	return []Command{
		{Type: CmdCreateSession, Time: 1_700_000_000_000, Timeout: 30000, Password: []byte("0123456789abcdef")},
		{Type: CmdCreateSession, Time: -5, Timeout: math.MaxInt32},
		{Type: CmdCreateSession, Timeout: math.MinInt32, Password: []byte{0}},
		{Type: CmdCloseSession, Time: 7, Session: sid},
		{Type: CmdCloseSession, Session: math.MinInt64, Time: math.MaxInt64},
		{Type: CmdAttachSession, Time: 9, Session: sid, Owner: "s2/17"},
		{Type: CmdSetData, Session: sid, Owner: "s1/1", Op: Op{Type: CmdSetData, Path: "/a", Version: -1}},
		{Type: CmdSetData, Session: sid, Owner: "s1/1", EnforceQuota: true, Op: Op{Type: CmdSetData, Path: "/a", Data: []byte("q"), Version: -1}},
		{Type: CmdCreate, EnforceQuota: true, Op: Op{Type: CmdCreate, Path: "/q/a", ACL: vocab.OpenACLUnsafe}},
		{Type: CmdCreate, Time: 1 << 62, Session: sid, Auth: []vocab.Id{digAlice, {Scheme: "ip", ID: "10.0.0.1"}},
			Op: Op{Type: CmdCreate, Path: "/a", Data: []byte("x"), ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeEphemeralSequential}},
		{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/t/", Data: []byte{}, Mode: vocab.ModePersistentSequentialTTL, TTL: MaxTTL,
			ACL: []vocab.ACL{{Perms: vocab.PermRead, ID: vocab.AnyoneID}, {Perms: vocab.PermAll, ID: digBob}, {Perms: math.MinInt32, ID: vocab.AuthIDs}}}},
		{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/big", Data: bytes.Repeat([]byte{0xab}, oneMiB), ACL: vocab.OpenACLUnsafe}},
		{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/päth/ü", Mode: -1, TTL: math.MinInt64, Version: math.MinInt32}},
		{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/c", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeContainer}},
		{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: "/a", Version: -1}},
		{Type: CmdDelete, Session: sid, Op: Op{Type: CmdDelete, Path: "/a", Version: math.MaxInt32}},
		{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/a", Data: []byte("new"), Version: 3}},
		{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/a", Version: -1}},
		{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/a", Data: []byte{}, Version: -1}},
		{Type: CmdSetACL, Auth: []vocab.Id{digAlice}, Op: Op{Type: CmdSetACL, Path: "/a", ACL: vocab.CreatorAllACL, Version: 0}},
		{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: "/a", Version: 2}},
		{Type: CmdMulti},
		{Type: CmdMulti, Ops: []Op{{Type: CmdDelete, Path: "/a", Version: -1}, {Type: CmdDelete, Path: "/b", Version: -1}}},
		{Type: CmdMulti, Ops: []Op{{Type: CmdCheck}, {Type: CmdCheck}, {Type: CmdCheck}, {Type: CmdCheck}}},
		{Type: CmdMulti, Session: sid, Auth: []vocab.Id{digBob}, Ops: []Op{
			{Type: CmdCreate, Path: "/m", Data: []byte("1"), ACL: []vocab.ACL{{Perms: vocab.PermAll, ID: digBob}}, Mode: vocab.ModeEphemeral},
			{Type: CmdSetData, Path: "/m", Data: []byte("22"), Version: 0},
			{Type: CmdCheck, Path: "/m", Version: 1},
			{Type: CmdDelete, Path: "/m", Version: 1},
			{Type: CmdSetACL, Path: "/m", ACL: vocab.OpenACLUnsafe, Version: -1},
			{Type: 200, Path: "/unknown op type", Data: []byte{}},
		}},
		{Type: CmdDeleteContainer, Time: 99, Op: Op{Type: CmdDeleteContainer, Path: "/c"}},
		{Type: CmdSetConfig, Time: 99, Op: Op{Type: CmdSetConfig, Path: "/zookeeper/config", Data: []byte("server.1=a:1:2:participant\n"), TTL: -1}},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	seen := map[CmdType]bool{}
	for _, c := range sampleCommands() {
		seen[c.Type] = true
		enc := c.Encode(nil)
		got, err := DecodeCommand(enc)
		if err != nil {
			t.Errorf("DecodeCommand(Encode(%s)): %v", describeCmd(&c), err)
			continue
		}
		if want := normCommand(&c); !reflect.DeepEqual(*got, want) {
			t.Errorf("round trip of %s\n  got  %+v\n  want %+v", describeCmd(&c), *got, want)
		}
		if again := got.Encode(nil); !bytes.Equal(again, enc) {
			t.Errorf("re-encoding %s changed the bytes", describeCmd(&c))
		}
		prefix := []byte("prefix")
		if app := c.Encode(prefix); !bytes.HasPrefix(app, prefix) || !bytes.Equal(app[len(prefix):], enc) {
			t.Errorf("Encode(dst) of %s does not append to dst", describeCmd(&c))
		}
	}
	for typ := CmdCreateSession; typ < cmdTypeEnd; typ++ {
		if !seen[typ] {
			t.Errorf("no sample of %v", typ)
		}
	}
}

// TestMultiOfSmallOpsDecodes: an op can be as short as 7 bytes (type, empty
// path, null data, no ACL, mode, ttl, version), so the multi's op count must
// not demand more per op than that. Otherwise a client's multi of two
// deletes of short paths commits, and then no server can decode it.
func TestMultiOfSmallOpsDecodes(t *testing.T) {
	for n := 1; n <= 40; n++ {
		c := Command{Type: CmdMulti}
		for i := 0; i < n; i++ {
			c.Ops = append(c.Ops, Op{Type: CmdDelete, Path: "/a", Version: -1})
		}
		if _, err := DecodeCommand(c.Encode(nil)); err != nil {
			t.Fatalf("multi of %d deletes of /a: %v", n, err)
		}
	}
}

func TestCommandRoundTripGenerated(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		m := newRefModel(16)
		g := newCmdGen(seed, m)
		for i := 0; i < 300; i++ {
			term, c := g.next()
			m.apply(term, c)
			got, err := DecodeCommand(c.Encode(nil))
			if err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, i, describeCmd(c), err)
			}
			if want := normCommand(c); !reflect.DeepEqual(*got, want) {
				t.Fatalf("seed %d step %d round trip\n  got  %+v\n  want %+v", seed, i, *got, want)
			}
		}
	}
}

// Helpers to build malformed encodings by hand.

func cfUv(v uint64) []byte { return binary.AppendUvarint(nil, v) }
func cfSv(v int64) []byte  { return binary.AppendVarint(nil, v) }

func cfCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// head is a format-1 header of type typ: time 0, session 0, no auth.
func cfHead(typ CmdType) []byte { return []byte{commandFormat, byte(typ), 0, 0, 0} }

// cfRawOp encodes an op field by field.
func cfRawOp(typ CmdType, path string, data []byte, acl []byte, mode, ttl, version []byte) []byte {
	return cfCat([]byte{byte(typ)}, cfUv(uint64(len(path))), []byte(path), data, acl, mode, ttl, version)
}

var (
	cfNull  = []byte{0}
	cfNoACL = []byte{0}
	cfZero  = []byte{0}
)

func TestDecodeCommandErrors(t *testing.T) {
	valid := (&Command{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: "/a", Version: 1}}).Encode(nil)
	tests := []struct {
		name string
		in   []byte
		want string // in the message
	}{
		{"nil", nil, ""},
		{"empty", []byte{}, ""},
		{"format only", []byte{commandFormat}, ""},
		{"format 0", cfCat([]byte{0}, valid[1:]), "unknown format version 0"},
		{"format 4", cfCat([]byte{4}, valid[1:]), "unknown format version 4"},
		{"format 3 without flags", cfCat([]byte{3, byte(CmdCloseSession), 0, 0}, cfUv(0), cfUv(0)), "with flags 0"},
		{"format 3 with an unknown flag", cfCat([]byte{3, byte(CmdCloseSession), 0, 0}, cfUv(0), cfUv(2)), "with flags 0x2"},
		{"type 0", cfHead(0), "unknown command type 0"},
		{"type 12", cfHead(12), "unknown command type 12"},
		{"format 2 without an owner", cfCat([]byte{2, byte(CmdCloseSession), 0, 0}, cfUv(0)), "without an owner"},
		{"type 255", cfCat(cfHead(255), valid[5:]), "unknown command type 255"},
		{"op of another type", cfCat(cfHead(CmdCreate), valid[5:]), "carries a check op"},
		{"trailing byte", cfCat(valid, cfZero), "1 trailing bytes"},
		{"trailing bytes after closeSession", cfCat(cfHead(CmdCloseSession), []byte("xyz")), "3 trailing bytes"},
		{"time overflows", cfCat([]byte{commandFormat, byte(CmdCloseSession)}, bytes.Repeat([]byte{0xff}, 10), []byte{1, 0, 0}), "varint"},
		{"unterminated varint", []byte{commandFormat, byte(CmdCloseSession), 0x80}, "varint"},
		{"timeout past int32", cfCat(cfHead(CmdCreateSession), cfSv(math.MaxInt32+1), cfZero), "int32"},
		{"timeout below int32", cfCat(cfHead(CmdCreateSession), cfSv(math.MinInt32-1), cfZero), "int32"},
		{"password past the end", cfCat(cfHead(CmdCreateSession), cfSv(10), cfUv(5), []byte("abc")), "length"},
		{"version past int32", cfCat(cfHead(CmdCheck), cfRawOp(CmdCheck, "/a", cfNull, cfNoACL, cfZero, cfZero, cfSv(1<<31))), "int32"},
		{"mode past uint32", cfCat(cfHead(CmdCreate), cfRawOp(CmdCreate, "/a", cfNull, cfNoACL, cfUv(1<<32), cfZero, cfZero)), "uint32"},
		{"perms past uint32", cfCat(cfHead(CmdCreate), cfRawOp(CmdCreate, "/a", cfNull,
			cfCat(cfUv(1), cfUv(1<<32), cfUv(5), []byte("world"), cfUv(6), []byte("anyone")), cfZero, cfZero, cfZero)), "uint32"},
		{"path past the end", cfCat(cfHead(CmdCheck), []byte{byte(CmdCheck)}, cfUv(50), []byte("/a")), "length"},
		{"data past the end", cfCat(cfHead(CmdSetData), cfRawOp(CmdSetData, "/a", cfCat(cfUv(100), []byte("xy")), cfNoACL, cfZero, cfZero, cfZero)), "length"},
		{"auth id past the end", cfCat([]byte{commandFormat, byte(CmdCloseSession), 0, 0}, cfUv(1), cfUv(6), []byte("digest"), cfUv(9)), "length"},
		{"multi op cut short", cfCat(cfHead(CmdMulti), cfUv(1), []byte{byte(CmdCheck), 2, '/', 'a', 0, 0, 0, 0}), ""},
	}
	for _, tc := range tests {
		c, err := DecodeCommand(tc.in)
		if err == nil {
			t.Errorf("%s: DecodeCommand(%x) = %+v, want an error", tc.name, tc.in, c)
			continue
		}
		if c != nil {
			t.Errorf("%s: DecodeCommand returned a command with its error", tc.name)
		}
		if !errors.Is(err, ErrDecode) {
			t.Errorf("%s: error %v does not wrap ErrDecode", tc.name, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.want)
		}
	}
}

// TestDecodeCommandTruncated: every proper prefix of an encoding is an error.
func TestDecodeCommandTruncated(t *testing.T) {
	for _, c := range sampleCommands() {
		enc := c.Encode(nil)
		cuts := len(enc)
		if cuts > 4096 {
			cuts = 64 // the 1 MiB sample: the header and the first bytes of its data
		}
		for n := 0; n < cuts; n++ {
			if _, err := DecodeCommand(enc[:n]); !errors.Is(err, ErrDecode) {
				t.Fatalf("%s cut to %d of %d bytes: err = %v, want ErrDecode", describeCmd(&c), n, len(enc), err)
			}
		}
		if _, err := DecodeCommand(enc[:len(enc)-1]); !errors.Is(err, ErrDecode) {
			t.Fatalf("%s without its last byte: err = %v", describeCmd(&c), err)
		}
	}
}

// TestDecodeCommandForgedCounts: a short input claiming a huge number of
// things or a huge length fails without allocating for the claim.
func TestDecodeCommandForgedCounts(t *testing.T) {
	const huge = 1 << 62
	forged := map[string][]byte{
		"auth ids":     cfCat([]byte{commandFormat, byte(CmdCloseSession), 0, 0}, cfUv(huge), []byte("ab")),
		"multi ops":    cfCat(cfHead(CmdMulti), cfUv(huge), []byte{byte(CmdCheck), 0, 0, 0, 0, 0, 0}),
		"acl entries":  cfCat(cfHead(CmdCreate), []byte{byte(CmdCreate), 0, 0}, cfUv(huge), []byte{1, 0, 0}),
		"path length":  cfCat(cfHead(CmdCheck), []byte{byte(CmdCheck)}, cfUv(huge), []byte("/a")),
		"data length":  cfCat(cfHead(CmdSetData), []byte{byte(CmdSetData), 0}, cfUv(huge), []byte("xy")),
		"password":     cfCat(cfHead(CmdCreateSession), cfSv(10), cfUv(huge), []byte("pw")),
		"max uvarint":  cfCat(cfHead(CmdMulti), cfUv(math.MaxUint64)),
		"ops that fit": cfCat(cfHead(CmdMulti), cfUv(100), bytes.Repeat([]byte{byte(CmdCheck), 0, 0, 0, 0, 0}, 120)),
	}
	for name, in := range forged {
		if _, err := DecodeCommand(in); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", name, err)
		}
		allocs := testing.AllocsPerRun(50, func() { DecodeCommand(in) })
		bytesPer := allocatedBytes(50, func() { DecodeCommand(in) })
		// A Command, an error and what the input can pay for: a few
		// allocations and tens of bytes for each byte, nothing for the claim.
		if allocs > 8+float64(len(in))/4 || bytesPer > 512+64*float64(len(in)) {
			t.Errorf("%s: decoding %d bytes makes %.0f allocations of %.0f bytes", name, len(in), allocs, bytesPer)
		}
	}
}

// allocatedBytes is the average heap bytes fn allocates.
func allocatedBytes(runs int, fn func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fn()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// TestApplyEntryRejectsWithoutConsumingZxid: an undecodable entry is an
// error for the caller and no change at all, not even of the clock.
func TestApplyEntryRejectsWithoutConsumingZxid(t *testing.T) {
	f := New()
	f.Apply(1, &Command{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/a", ACL: vocab.OpenACLUnsafe}})
	before, z := f.View().Digest(), f.LastZxid()
	for _, in := range [][]byte{nil, {2}, cfHead(0), cfCat(cfHead(CmdCloseSession), cfZero)} {
		r, trig, err := f.ApplyEntry(1, in)
		if !errors.Is(err, ErrDecode) || r.Zxid != 0 || trig != nil {
			t.Errorf("ApplyEntry(%x) = %+v, %v, %v", in, r, trig, err)
		}
	}
	if f.LastZxid() != z || f.View().Digest() != before {
		t.Errorf("rejected entries changed the state: zxid %v -> %v", z, f.LastZxid())
	}
}

// TestApplyUnknownType: a command Apply does not know (possible only through
// Apply, never from a decoded entry) is Unimplemented and changes nothing but
// the clock.
func TestApplyUnknownType(t *testing.T) {
	f := New()
	dump := dumpView(f.View())
	for _, typ := range []CmdType{0, cmdTypeEnd, 255} {
		r, trig := f.Apply(1, &Command{Type: typ, Op: Op{Type: CmdCreate, Path: "/x", ACL: vocab.OpenACLUnsafe}})
		if vocab.CodeOf(r.Err) != vocab.Unimplemented || r.Zxid != f.LastZxid() || len(trig) != 0 {
			t.Errorf("Apply of type %d = %+v %v", typ, r, trig)
		}
	}
	if got := dumpView(f.View()); got != dump {
		t.Errorf("unknown commands changed the tree:\n%s", got)
	}
	r, _ := f.Apply(1, &Command{Type: 42, Session: 0x9999})
	if vocab.CodeOf(r.Err) != vocab.SessionExpired {
		t.Errorf("unknown type from an unknown session: %v, want SessionExpired (checked first)", r.Err)
	}
}

func TestCmdTypeString(t *testing.T) {
	if CmdMulti.String() != "multi" || CmdDeleteContainer.String() != "deleteContainer" ||
		CmdType(0).String() != "CmdType(0)" || CmdType(77).String() != "CmdType(77)" {
		t.Error("CmdType.String")
	}
}

// hasOverlongVarint reports whether b might hold a varint with a redundant
// cfZero group: such a varint ends in 0x00 right after a byte with its
// continuation bit set.
func hasOverlongVarint(b []byte) bool {
	for i := 1; i < len(b); i++ {
		if b[i] == 0 && b[i-1] >= 0x80 {
			return true
		}
	}
	return false
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		if enc := c.Encode(nil); len(enc) < 4096 {
			f.Add(enc)
		}
	}
	m := newRefModel(16)
	g := newCmdGen(7, m)
	for range 60 {
		term, c := g.next()
		m.apply(term, c)
		f.Add(c.Encode(nil))
	}
	f.Add([]byte{})
	f.Add(cfCat(cfHead(CmdMulti), cfUv(3), []byte{7, 0, 0, 0, 0, 0, 0}))
	f.Add(cfCat(cfHead(CmdCheck), cfRawOp(CmdCheck, "/a", []byte{0x81, 0x00}, cfNoACL, cfZero, cfZero, cfZero)))

	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := DecodeCommand(in)
		if err != nil {
			if c != nil || !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeCommand = %v, %v: want nil and an ErrDecode", c, err)
			}
			return
		}
		enc := c.Encode(nil)
		if !bytes.Equal(enc, in) {
			// The one freedom the format leaves is a varint written with
			// redundant cfZero groups; its canonical form is shorter.
			if len(enc) >= len(in) || !hasOverlongVarint(in) {
				t.Fatalf("re-encoding changed the bytes:\n  in  %x\n  out %x", in, enc)
			}
		}
		c2, err := DecodeCommand(enc)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("decode(encode(c)) != c:\n  %+v\n  %+v", c, c2)
		}
	})
}

// fuzzFixture is an FSM holding a session and one node of each kind. The
// session owns /a-c and /a/e: "/a-c" sorts before "/a/e" although /a's
// subtree comes first in a pre-order walk.
func fuzzFixture() (*FSM, int64) {
	f := New()
	r, _ := f.Apply(1, &Command{Type: CmdCreateSession, Time: 1000, Timeout: 5000, Password: []byte("pw")})
	sid := r.SessionID
	for _, o := range []Op{
		{Path: "/a", Data: []byte("a"), ACL: vocab.OpenACLUnsafe},
		{Path: "/a/b", Data: []byte{}, ACL: vocab.OpenACLUnsafe},
		{Path: "/a/e", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeEphemeral},
		{Path: "/a-c", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeEphemeral},
		{Path: "/c", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeContainer},
		{Path: "/c/k", ACL: vocab.OpenACLUnsafe},
		{Path: "/t", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistentTTL, TTL: 10},
		{Path: "/d", Data: []byte("secret"), ACL: []vocab.ACL{{Perms: vocab.PermAll, ID: digAlice}}},
		{Path: "/s", ACL: vocab.OpenACLUnsafe},
		{Path: "/s/", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistentSequential},
	} {
		o.Type = CmdCreate
		if r, _ := f.Apply(1, &Command{Type: CmdCreate, Time: 1000, Session: sid, Op: o}); r.Err != nil {
			panic("fixture: " + r.Err.Error())
		}
	}
	return f, sid
}

func restoreCopy(t *testing.T, v *View) *FSM {
	t.Helper()
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	g := New()
	if err := g.Restore(&buf); err != nil {
		t.Fatalf("Restore of a fresh snapshot: %v", err)
	}
	return g
}

func FuzzApply(f *testing.F) {
	const sid = 0x100000001 // fuzzFixture's session
	for _, c := range sampleCommands() {
		if c.Type != CmdCreateSession && c.Type != CmdCloseSession {
			c.Session = sid
		}
		if enc := c.Encode(nil); len(enc) < 4096 {
			f.Add(uint8(1), enc)
		}
	}
	for _, c := range []Command{
		{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: "/a-c", Version: -1}},
		{Type: CmdDeleteContainer, Time: 5000, Op: Op{Type: CmdDeleteContainer, Path: "/t"}},
		{Type: CmdMulti, Session: sid, Ops: []Op{{Type: CmdDelete, Path: "/c/k", Version: -1}, {Type: CmdCreate, Path: "/a/e/x", ACL: vocab.OpenACLUnsafe}}},
		{Type: CmdMulti, Ops: []Op{{Type: CmdCreate, Path: "/s/", Mode: vocab.ModePersistentSequential, ACL: vocab.OpenACLUnsafe}, {Type: CmdCheck, Path: "/a", Version: 0}}},
		{Type: CmdSetACL, Auth: []vocab.Id{digAlice}, Op: Op{Type: CmdSetACL, Path: "/d", ACL: vocab.CreatorAllACL, Version: 0}},
		{Type: CmdCreate, Session: sid, Op: Op{Type: CmdCreate, Path: "/a-c-2", Mode: vocab.ModeEphemeral, ACL: vocab.OpenACLUnsafe}},
	} {
		f.Add(uint8(2), c.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, term uint8, in []byte) {
		fsm, sid := fuzzFixture()
		before := fsm.View()
		beforeDump := dumpView(before)
		c, err := DecodeCommand(in)
		if err != nil {
			if _, _, err := fsm.ApplyEntry(uint64(term), in); err == nil || fsm.LastZxid() != before.LastZxid() {
				t.Fatalf("ApplyEntry of undecodable bytes: %v, zxid %v -> %v", err, before.LastZxid(), fsm.LastZxid())
			}
			return
		}
		r, trig := fsm.Apply(uint64(term), c)
		if r.Zxid <= before.LastZxid() || fsm.LastZxid() != r.Zxid {
			t.Fatalf("zxid %v after %v; LastZxid %v", r.Zxid, before.LastZxid(), fsm.LastZxid())
		}
		v := fsm.View()
		if v.LastZxid() != r.Zxid {
			t.Fatalf("stale view after %s: view at %v, applied %v", describeCmd(c), v.LastZxid(), r.Zxid)
		}
		if r.Err != nil {
			if _, ok := r.Err.(*vocab.Error); !ok || vocab.CodeOf(r.Err) == vocab.OK || len(trig) != 0 {
				t.Fatalf("failed %s: err %#v, triggers %v", describeCmd(c), r.Err, trig)
			}
			if got := dumpView(v); got != beforeDump {
				t.Fatalf("failed %s (%v) changed the state: %s", describeCmd(c), r.Err, dumpDiff(beforeDump, got))
			}
		}
		for _, tr := range trig {
			if tr.Zxid != int64(r.Zxid) {
				t.Fatalf("trigger %v of entry %v", tr, r.Zxid)
			}
		}
		if dumpView(before) != beforeDump {
			t.Fatal("an earlier view changed")
		}
		// The state stays restorable, and a restored copy goes on alike.
		g := restoreCopy(t, v)
		if g.View().Digest() != v.Digest() {
			t.Fatalf("restored state's digest differs after %s", describeCmd(c))
		}
		if a, b := dumpView(v), dumpView(g.View()); a != b {
			t.Fatalf("restored state reads differently after %s: %s", describeCmd(c), dumpDiff(a, b))
		}
		next := &Command{Type: CmdCloseSession, Time: 9000, Session: sid}
		r1, t1 := fsm.Apply(uint64(term), next)
		r2, t2 := g.Apply(uint64(term), next)
		if !reflect.DeepEqual(r1, r2) || !sameTriggers(t1, t2) {
			t.Fatalf("after %s, closeSession differs on the restored copy:\n  %+v %v\n  %+v %v", describeCmd(c), r1, t1, r2, t2)
		}
		if fsm.View().Digest() != g.View().Digest() {
			t.Fatalf("after %s and closeSession, the restored copy's digest differs", describeCmd(c))
		}
	})
}
