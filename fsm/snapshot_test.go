package fsm

import (
	"bytes"
	"coord/vocab"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// ---------------------------------------------------------------------------
// The stream format, as snapshot.go documents it, rebuilt here so tests can
// take streams apart and forge well-framed bad ones.

var snapTestCRC = crc32.MakeTable(crc32.Castagnoli)

// snapBlock locates one block of a stream: its length prefix at start, its
// payload in [payload, crc) and its checksum in [crc, end).
type snapBlock struct{ start, payload, crc, end int }

// snapBlocks splits a well-formed stream into its blocks, without the
// zero-length end marker.
func snapBlocks(t testing.TB, b []byte) []snapBlock {
	t.Helper()
	var out []snapBlock
	off := 0
	for {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 {
			t.Fatalf("bad block length at %d", off)
		}
		if n == 0 {
			if off+k != len(b) {
				t.Fatalf("%d bytes after the end marker", len(b)-off-k)
			}
			return out
		}
		blk := snapBlock{start: off, payload: off + k, crc: off + k + int(n), end: off + k + int(n) + 4}
		if blk.end > len(b) {
			t.Fatalf("block at %d runs past the stream", off)
		}
		if crc32.Checksum(b[blk.payload:blk.crc], snapTestCRC) != binary.BigEndian.Uint32(b[blk.crc:blk.end]) {
			t.Fatalf("block at %d: checksum mismatch", off)
		}
		out = append(out, blk)
		off = blk.end
	}
}

// snapFrame frames payloads as blocks and ends the stream.
func snapFrame(payloads ...[]byte) []byte {
	var out []byte
	for _, p := range payloads {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(p, snapTestCRC))
	}
	return append(out, 0)
}

func snapPayloads(t testing.TB, b []byte) [][]byte {
	var out [][]byte
	for _, blk := range snapBlocks(t, b) {
		out = append(out, b[blk.payload:blk.crc])
	}
	return out
}

// snapBuilder writes records by hand.
type snapBuilder struct{ b []byte }

func (s *snapBuilder) uv(v uint64) *snapBuilder { s.b = binary.AppendUvarint(s.b, v); return s }
func (s *snapBuilder) sv(v int64) *snapBuilder  { s.b = binary.AppendVarint(s.b, v); return s }
func (s *snapBuilder) str(v string) *snapBuilder {
	s.uv(uint64(len(v)))
	s.b = append(s.b, v...)
	return s
}

func (s *snapBuilder) header(epoch, counter, term, nodes, sessions uint64) *snapBuilder {
	s.b = append(s.b, "COORDSNP"...)
	s.b = append(s.b, 1)
	return s.uv(epoch).uv(counter).uv(term).uv(nodes).uv(sessions)
}

func (s *snapBuilder) session(id, timeout int64, pw string) *snapBuilder {
	return s.sv(id).sv(timeout).str(pw)
}

func (s *snapBuilder) acl(acl ...vocab.ACL) *snapBuilder {
	s.b = append(s.b, 1)
	s.uv(uint64(len(acl)))
	for _, a := range acl {
		s.uv(uint64(uint32(a.Perms))).str(a.ID.Scheme).str(a.ID.ID)
	}
	return s
}

// snapFields are a znode's czxid mzxid pzxid ctime mtime owner version
// cversion aversion.
type snapFields [9]int64

func (s *snapBuilder) node(name string, acl uint64, f snapFields, data []byte, kids uint64) *snapBuilder {
	s.b = append(s.b, 2)
	s.str(name).uv(acl)
	for _, x := range f {
		s.sv(x)
	}
	if data == nil {
		s.uv(0)
	} else {
		s.uv(uint64(len(data)) + 1)
		s.b = append(s.b, data...)
	}
	return s.uv(kids)
}

func (s *snapBuilder) end() *snapBuilder { s.b = append(s.b, 0); return s }

// ---------------------------------------------------------------------------
// A rich state.

const snapT0 = int64(1_700_000_000_000)

type richState struct {
	f          *FSM
	s1, s2, s3 int64
}

func mustApply(t testing.TB, f *FSM, term uint64, c Command) Result {
	t.Helper()
	r, _ := f.Apply(term, &c)
	if r.Err != nil {
		t.Fatalf("%s: %v", describeCmd(&c), r.Err)
	}
	return r
}

func mkCreate(path string, data []byte, mode vocab.CreateMode, acl ...vocab.ACL) Command {
	if len(acl) == 0 {
		acl = vocab.OpenACLUnsafe
	}
	return Command{Type: CmdCreate, Time: snapT0, Op: Op{Type: CmdCreate, Path: path, Data: data, ACL: acl, Mode: mode}}
}

func as(session int64, c Command) Command { c.Session = session; return c }

func ttlCreate(path string, ttl int64) Command {
	c := mkCreate(path, nil, vocab.ModePersistentTTL)
	c.Op.TTL = ttl
	return c
}

func mkDelete(path string) Command {
	return Command{Type: CmdDelete, Time: snapT0, Op: Op{Type: CmdDelete, Path: path, Version: -1}}
}

// richFSM builds every kind of thing a snapshot carries: sessions with and
// without passwords and ephemerals, null, empty and 1 MiB data, every ACL
// scheme, containers and TTL nodes (some of them clean-up candidates), a
// path 300 deep, wide children under /wide, and zxids from three terms.
// Several paths put a '-' where another has a '/': "/app-e" sorts before
// "/app/e1" but comes after it in a pre-order walk.
func richFSM(t testing.TB, wide int) *richState {
	t.Helper()
	f := New()
	rs := &richState{f: f}
	rs.s1 = mustApply(t, f, 1, Command{Type: CmdCreateSession, Time: snapT0, Timeout: 4000, Password: []byte("secret-1")}).SessionID
	rs.s2 = mustApply(t, f, 1, Command{Type: CmdCreateSession, Time: snapT0, Timeout: 10000}).SessionID
	rs.s3 = mustApply(t, f, 1, Command{Type: CmdCreateSession, Time: snapT0, Timeout: 6000, Password: []byte{0, 1, 2}}).SessionID
	for _, c := range []Command{
		mkCreate("/app", []byte("app"), vocab.ModePersistent),
		as(rs.s1, mkCreate("/app/e1", []byte("eph"), vocab.ModeEphemeral)),
		as(rs.s1, mkCreate("/app-e", nil, vocab.ModeEphemeral)),
		as(rs.s2, mkCreate("/app.x", []byte{}, vocab.ModeEphemeral)),
		mkCreate("/app/cfg", []byte{}, vocab.ModePersistent),
		mkCreate("/app/null", nil, vocab.ModePersistent),
		mkCreate("/locks", nil, vocab.ModePersistent),
		as(rs.s1, mkCreate("/locks/lock-", nil, vocab.ModeEphemeralSequential)),
		as(rs.s2, mkCreate("/locks/lock-", nil, vocab.ModeEphemeralSequential)),
		as(rs.s1, mkCreate("/locks/lock-", nil, vocab.ModeEphemeralSequential)),
		mkDelete("/locks/lock-0000000000"),
		mkCreate("/acl", nil, vocab.ModePersistent),
		mkCreate("/acl/read", []byte("r"), vocab.ModePersistent, vocab.ReadACLUnsafe...),
		mkCreate("/acl/alice", []byte("a"), vocab.ModePersistent, vocab.ACL{Perms: vocab.PermAll, ID: digAlice}),
		mkCreate("/acl/mixed", nil, vocab.ModePersistent, vocab.ACL{Perms: vocab.PermRead | vocab.PermWrite, ID: digBob}, vocab.ACL{Perms: vocab.PermRead, ID: vocab.AnyoneID}),
		mkCreate("/acl/ip", nil, vocab.ModePersistent, vocab.ACL{Perms: vocab.PermAll, ID: vocab.Id{Scheme: "ip", ID: "10.0.0.0/8"}},
			vocab.ACL{Perms: vocab.PermRead, ID: vocab.Id{Scheme: "ip", ID: "2001:db8::/32"}}),
		mkCreate("/cont", nil, vocab.ModeContainer),
		mkCreate("/cont/k", []byte("k"), vocab.ModePersistent),
		mkCreate("/cont-empty", nil, vocab.ModeContainer),
		mkCreate("/cont-empty/gone", nil, vocab.ModePersistent),
		mkDelete("/cont-empty/gone"),
		mkCreate("/cont-new", nil, vocab.ModeContainer),
		mkCreate("/app/cont", nil, vocab.ModeContainer),
		mkCreate("/app/cont/x", nil, vocab.ModePersistent),
		mkDelete("/app/cont/x"),
		mkCreate("/app-cont", nil, vocab.ModeContainer),
		mkCreate("/app-cont/x", nil, vocab.ModePersistent),
		mkDelete("/app-cont/x"),
		ttlCreate("/ttl-short", 100),
		ttlCreate("/ttl-long", 100_000),
		ttlCreate("/ttl-dir", 50),
		mkCreate("/ttl-dir/k", nil, vocab.ModePersistent),
		ttlCreate("/app/ttl", 10),
		ttlCreate("/app-ttl", 10),
	} {
		mustApply(t, f, 1, c)
	}
	c := mkCreate("/acl/auth", []byte("mine"), vocab.ModePersistent, vocab.CreatorAllACL...)
	c.Auth = []vocab.Id{digAlice, digBob}
	mustApply(t, f, 1, c)
	mustApply(t, f, 2, Command{Type: CmdSetData, Time: snapT0 + 5, Op: Op{Type: CmdSetData, Path: "/app", Data: []byte("app2"), Version: 0}})
	mustApply(t, f, 2, Command{Type: CmdSetData, Time: snapT0 + 6, Op: Op{Type: CmdSetData, Path: "/app", Data: []byte("app3"), Version: -1}})
	mustApply(t, f, 2, Command{Type: CmdSetACL, Op: Op{Type: CmdSetACL, Path: "/acl/read", ACL: vocab.ReadACLUnsafe, Version: 0}, Auth: superAuth})
	deep := "/deep"
	mustApply(t, f, 2, mkCreate(deep, nil, vocab.ModePersistent))
	for i := 0; i < 300; i++ {
		deep += "/d"
		mustApply(t, f, 2, mkCreate(deep, []byte(fmt.Sprint(i)), vocab.ModePersistent))
	}
	mustApply(t, f, 2, mkCreate("/big", bytes.Repeat([]byte("0123456789abcdef"), oneMiB/16), vocab.ModePersistent))
	mustApply(t, f, 3, mkCreate("/wide", nil, vocab.ModePersistent))
	for i := 0; i < wide; i++ {
		mustApply(t, f, 3, mkCreate(fmt.Sprintf("/wide/c%05d", i), []byte{byte(i)}, vocab.ModePersistent))
	}
	for i := 0; i < wide; i += 7 {
		mustApply(t, f, 3, mkDelete(fmt.Sprintf("/wide/c%05d", i)))
	}
	mustApply(t, f, 3, mkCreate("/wide/s-", nil, vocab.ModePersistentSequential))
	return rs
}

func snapshotBytes(t testing.TB, v *View) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; %d bytes written", n, err, buf.Len())
	}
	return buf.Bytes()
}

func restoreBytes(t testing.TB, b []byte) *FSM {
	t.Helper()
	g := New()
	if err := g.Restore(bytes.NewReader(b)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return g
}

// sameViews compares everything two views show.
func sameViews(t *testing.T, what string, a, b *View) {
	t.Helper()
	if a.Digest() != b.Digest() {
		t.Errorf("%s: digests differ", what)
	}
	if a.LastZxid() != b.LastZxid() || a.Clock() != b.Clock() || a.NodeCount() != b.NodeCount() {
		t.Errorf("%s: clock %+v / %+v, nodes %d / %d", what, a.Clock(), b.Clock(), a.NodeCount(), b.NodeCount())
	}
	if da, db := dumpView(a), dumpView(b); da != db {
		t.Errorf("%s: %s", what, dumpDiff(da, db))
	}
	for _, now := range []int64{snapT0, snapT0 + 20, snapT0 + 200, snapT0 + 1e6} {
		if x, y := a.ExpiredTTLs(now), b.ExpiredTTLs(now); !slices.Equal(x, y) {
			t.Errorf("%s: ExpiredTTLs(%d) %q / %q", what, now, x, y)
		}
	}
}

func TestSnapshotRich(t *testing.T) {
	rs := richFSM(t, 10_000)
	f := rs.f
	v := f.View()
	snap := snapshotBytes(t, v)
	if len(snapBlocks(t, snap)) < 3 {
		t.Fatalf("the rich snapshot has %d blocks, want several", len(snapBlocks(t, snap)))
	}
	g := restoreBytes(t, snap)

	t.Run("round trip", func(t *testing.T) {
		sameViews(t, "restored", v, g.View())
		if got := snapshotBytes(t, g.View()); !bytes.Equal(got, snap) {
			t.Error("the restored state's snapshot is not byte-identical")
		}
		if d := v.Digest(); d != sha256.Sum256(snap) {
			t.Error("Digest is not the SHA-256 of the stream")
		}
		gv := g.View()
		if data, _, _ := gv.GetData("/big", nil); len(data) != oneMiB {
			t.Errorf("/big has %d bytes", len(data))
		}
		if kids, _, _ := gv.GetChildren("/wide", nil); len(kids) != 10_000-(10_000+6)/7+1 {
			t.Errorf("/wide has %d children", len(kids))
		}
		if data, _, _ := gv.GetData("/app/null", nil); data != nil {
			t.Errorf("null data came back as %q", data)
		}
		if data, _, _ := gv.GetData("/app/cfg", nil); data == nil || len(data) != 0 {
			t.Errorf("empty data came back as %s", fmtData(data))
		}
		// "auth" expanded in ZooKeeper's id-set order: bob before alice.
		if acl, _, _ := gv.GetACL("/acl/auth", superAuth); !slices.Equal(acl, []vocab.ACL{{Perms: vocab.PermAll, ID: digBob}, {Perms: vocab.PermAll, ID: digAlice}}) {
			t.Errorf("/acl/auth ACL %v", acl)
		}
		if s, ok := gv.Session(rs.s1); !ok || string(s.Password) != "secret-1" || s.Timeout != 4000 || s.Ephemerals != 3 {
			t.Errorf("session s1 restored as %+v, %v", s, ok)
		}
		if got, want := gv.GetEphemerals(rs.s1, "/"), []string{"/app-e", "/app/e1", "/locks/lock-0000000002"}; !slices.Equal(got, want) {
			t.Errorf("ephemerals of s1 %q", got)
		}
		if got, want := gv.ContainerCandidates(), []string{"/app-cont", "/app/cont", "/cont-empty"}; !slices.Equal(got, want) {
			t.Errorf("container candidates %q, want %q", got, want)
		}
	})

	t.Run("readers", func(t *testing.T) {
		for name, r := range map[string]io.Reader{
			"one byte": iotest.OneByteReader(bytes.NewReader(snap)),
			"half":     iotest.HalfReader(bytes.NewReader(snap)),
			"data+EOF": iotest.DataErrReader(bytes.NewReader(snap)),
		} {
			h := New()
			if err := h.Restore(r); err != nil {
				t.Errorf("%s reader: %v", name, err)
			} else if h.View().Digest() != v.Digest() {
				t.Errorf("%s reader: digest differs", name)
			}
		}
		h := New()
		if err := restorePipelined(t, h, iotest.HalfReader(bytes.NewReader(snap))); err != nil {
			t.Errorf("pipelined: %v", err)
		} else {
			sameViews(t, "pipelined", h.View(), v)
		}
	})

	t.Run("continues alike", func(t *testing.T) {
		both := func(term uint64, c Command) Result {
			t.Helper()
			r1, t1 := f.Apply(term, &c)
			r2, t2 := g.Apply(term, &c)
			if !reflect.DeepEqual(r1, r2) || !sameTriggers(t1, t2) {
				t.Fatalf("%s differs:\n  original %+v %v\n  restored %+v %v", describeCmd(&c), r1, t1, r2, t2)
			}
			return r1
		}
		if r := both(3, as(rs.s2, mkCreate("/locks/lock-", nil, vocab.ModeEphemeralSequential))); r.Path != "/locks/lock-0000000003" {
			t.Errorf("next lock %q, want /locks/lock-0000000003", r.Path)
		}
		if r := both(3, mkCreate("/wide/s-", nil, vocab.ModePersistentSequential)); !strings.HasPrefix(r.Path, "/wide/s-00000") {
			t.Errorf("sequential under /wide: %q", r.Path)
		}
		close := Command{Type: CmdCloseSession, Time: snapT0 + 10, Session: rs.s1}
		r1, trig := f.Apply(4, &close)
		r2, trig2 := g.Apply(4, &close)
		if !reflect.DeepEqual(r1, r2) || !sameTriggers(trig, trig2) {
			t.Fatalf("closeSession differs:\n  original %+v %v\n  restored %+v %v", r1, trig, r2, trig2)
		}
		var deleted []string
		for _, tr := range trig {
			if tr.Type == vocab.EventNodeDeleted {
				deleted = append(deleted, tr.Path)
			}
		}
		if want := []string{"/app-e", "/app/e1", "/locks/lock-0000000002"}; !slices.Equal(deleted, want) {
			t.Errorf("closeSession deleted %q, want %q in path order", deleted, want)
		}
		for _, p := range g.View().ContainerCandidates() {
			both(4, Command{Type: CmdDeleteContainer, Time: snapT0 + 20, Op: Op{Type: CmdDeleteContainer, Path: p}})
		}
		now := snapT0 + 200
		for _, p := range g.View().ExpiredTTLs(now) {
			both(4, Command{Type: CmdDeleteContainer, Time: now, Op: Op{Type: CmdDeleteContainer, Path: p}})
		}
		if got := g.View().ContainerCandidates(); len(got) != 0 {
			t.Errorf("candidates left after deleting them: %q", got)
		}
		for i := 1; i < 700; i += 3 {
			both(4, Command{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: fmt.Sprintf("/wide/c%05d", i), Version: -1}})
		}
		for i := 0; i < 200; i++ {
			both(5, mkCreate(fmt.Sprintf("/wide/n%05d", i), nil, vocab.ModePersistent))
		}
		both(5, Command{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/big", Data: bytes.Repeat([]byte{7}, oneMiB), Version: 0}})
		both(5, Command{Type: CmdMulti, Session: rs.s2, Ops: []Op{
			{Type: CmdCreate, Path: "/app/m", ACL: vocab.OpenACLUnsafe, Mode: vocab.ModeEphemeral},
			{Type: CmdCheck, Path: "/app", Version: 2},
			{Type: CmdDelete, Path: "/app.x", Version: 0},
		}})
		both(5, Command{Type: CmdMulti, Ops: []Op{{Type: CmdDelete, Path: "/deep", Version: -1}}})
		both(5, Command{Type: CmdCreateSession, Timeout: 100})
		both(5, Command{Type: CmdCloseSession, Session: rs.s2})
		sameViews(t, "after the same commands", f.View(), g.View())
	})
}

// TestViewFreshAfterRestore: after a successful Restore, View shows the
// restored state even if a view was taken before; that earlier view still
// shows the old one.
func TestViewFreshAfterRestore(t *testing.T) {
	src := New()
	mustApply(t, src, 7, mkCreate("/restored", []byte("yes"), vocab.ModePersistent))
	snap := snapshotBytes(t, src.View())

	f := New()
	mustApply(t, f, 1, mkCreate("/old", nil, vocab.ModePersistent))
	old := f.View()
	oldDigest := old.Digest()
	if err := f.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	v := f.View()
	if v.LastZxid() != src.LastZxid() || f.LastZxid() != src.LastZxid() {
		t.Errorf("after Restore: View().LastZxid() = %v, LastZxid() = %v, want %v", v.LastZxid(), f.LastZxid(), src.LastZxid())
	}
	if _, err := v.Exists("/restored"); err != nil {
		t.Errorf("View after Restore does not show the restored state: %v", err)
	}
	if _, err := v.Exists("/old"); err == nil {
		t.Error("View after Restore still shows the replaced state")
	}
	if old.Digest() != oldDigest {
		t.Error("a view taken before Restore changed")
	}
	if _, err := old.Exists("/old"); err != nil {
		t.Error("a view taken before Restore lost its node")
	}
	// And the restored FSM keeps going from the restored clock.
	r := mustApply(t, f, 7, mkCreate("/after", nil, vocab.ModePersistent))
	if r.Zxid != src.LastZxid()+1 {
		t.Errorf("first zxid after Restore %v, want %v", r.Zxid, src.LastZxid()+1)
	}
	if _, err := f.View().Exists("/after"); err != nil {
		t.Errorf("View after Restore then Apply: %v", err)
	}
}

// TestRestoreKeepsPathOrder: a session's ephemerals, containers and TTL
// nodes are sets ordered by path; a snapshot lists znodes in pre-order, which
// is not path order once a name holds a byte below '/' ("/a-c" < "/a/b").
func TestRestoreKeepsPathOrder(t *testing.T) {
	f := New()
	s := mustApply(t, f, 1, Command{Type: CmdCreateSession, Timeout: 1000}).SessionID
	for _, c := range []Command{
		mkCreate("/a", nil, vocab.ModePersistent),
		as(s, mkCreate("/a/b", nil, vocab.ModeEphemeral)),
		as(s, mkCreate("/a-c", nil, vocab.ModeEphemeral)),
		as(s, mkCreate("/a.d", nil, vocab.ModeEphemeral)),
		mkCreate("/c", nil, vocab.ModeContainer),
		mkCreate("/c/x", nil, vocab.ModeContainer),
		mkCreate("/c/x/y", nil, vocab.ModePersistent),
		mkDelete("/c/x/y"),
		mkCreate("/c-y", nil, vocab.ModeContainer),
		mkCreate("/c-y/z", nil, vocab.ModePersistent),
		mkDelete("/c-y/z"),
		mkCreate("/t", nil, vocab.ModePersistent),
		ttlCreate("/t/x", 5),
		ttlCreate("/t-y", 5),
	} {
		mustApply(t, f, 1, c)
	}
	g := restoreBytes(t, snapshotBytes(t, f.View()))
	fv, gv := f.View(), g.View()
	if a, b := fv.GetEphemerals(s, "/"), gv.GetEphemerals(s, "/"); !slices.Equal(a, b) || !slices.IsSorted(b) {
		t.Errorf("ephemerals %q, restored %q", a, b)
	}
	if a, b := fv.ContainerCandidates(), gv.ContainerCandidates(); !slices.Equal(a, b) || !slices.IsSorted(b) {
		t.Errorf("container candidates %q, restored %q", a, b)
	}
	if a, b := fv.ExpiredTTLs(snapT0), gv.ExpiredTTLs(snapT0); !slices.Equal(a, b) || !slices.IsSorted(b) {
		t.Errorf("expired TTLs %q, restored %q", a, b)
	}
	for _, c := range []Command{
		mkDelete("/a-c"),
		{Type: CmdDeleteContainer, Op: Op{Type: CmdDeleteContainer, Path: "/c-y"}},
		{Type: CmdDeleteContainer, Time: snapT0 + 10, Op: Op{Type: CmdDeleteContainer, Path: "/t-y"}},
		{Type: CmdCloseSession, Session: s},
	} {
		r1, t1 := f.Apply(1, &c)
		r2, t2, panicked := applyRecover(g, 1, &c)
		if panicked != nil {
			t.Fatalf("restored FSM panicked on %s: %v", describeCmd(&c), panicked)
		}
		if !reflect.DeepEqual(r1, r2) || !sameTriggers(t1, t2) {
			t.Errorf("%s:\n  original %+v %v\n  restored %+v %v", describeCmd(&c), r1, t1, r2, t2)
		}
	}
	sameViews(t, "after deletes", f.View(), g.View())
}

func applyRecover(f *FSM, term uint64, c *Command) (r Result, trig []Trigger, panicked any) {
	defer func() { panicked = recover() }()
	r, trig = f.Apply(term, c)
	return r, trig, nil
}

// ---------------------------------------------------------------------------
// Corrupt streams.

// victim is an FSM with a state of its own, to check a failed Restore keeps
// it.
type victim struct {
	f      *FSM
	digest [32]byte
	zxid   int64
	dump   string
}

func newVictim(t testing.TB) *victim {
	f := New()
	mustApply(t, f, 3, mkCreate("/mine", []byte("keep me"), vocab.ModePersistent))
	mustApply(t, f, 3, Command{Type: CmdCreateSession, Timeout: 500})
	v := f.View()
	return &victim{f: f, digest: v.Digest(), zxid: int64(v.LastZxid()), dump: dumpView(v)}
}

// restoreFails restores r's stream twice, decoding on this goroutine and
// on another (RestorePipelined): both must fail alike, leave the state as
// it was, and the second must have ended its decoder when it returns.
func (vi *victim) restoreFails(t *testing.T, what string, r io.Reader) {
	t.Helper()
	stream, rerr := io.ReadAll(r)
	if rerr != nil {
		t.Fatal(rerr)
	}
	err := vi.f.Restore(bytes.NewReader(stream))
	if err == nil {
		t.Fatalf("%s: Restore succeeded", what)
	}
	if !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("%s: error %v does not wrap ErrCorruptSnapshot", what, err)
	}
	v := vi.f.View()
	if int64(vi.f.LastZxid()) != vi.zxid || v.Digest() != vi.digest {
		t.Fatalf("%s: a failed Restore changed the state", what)
	}
	perr := restorePipelined(t, vi.f, bytes.NewReader(stream))
	if perr == nil || perr.Error() != err.Error() {
		t.Fatalf("%s: pipelined restore: %v; Restore: %v", what, perr, err)
	}
	if int64(vi.f.LastZxid()) != vi.zxid || vi.f.View().Digest() != vi.digest {
		t.Fatalf("%s: a failed pipelined restore changed the state", what)
	}
}

// restorePipelined restores with the decoding on a goroutine of its own and
// fails the test if that goroutine reads r after the restore returned, or
// does not end.
func restorePipelined(t *testing.T, f *FSM, r io.Reader) error {
	t.Helper()
	done := make(chan struct{})
	gr := &guardedReader{r: r}
	spawned := false
	err := f.RestorePipelined(gr, func(decode func()) {
		spawned = true
		go func() {
			defer close(done)
			decode()
		}()
	})
	gr.returned.Store(true)
	if !spawned { // the header or the sessions failed
		return err
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the decoder did not end")
	}
	if gr.late.Load() {
		t.Fatal("the decoder read the stream after RestorePipelined returned")
	}
	return err
}

type guardedReader struct {
	r              io.Reader
	returned, late atomic.Bool
}

func (g *guardedReader) Read(p []byte) (int, error) {
	if g.returned.Load() {
		g.late.Store(true)
	}
	return g.r.Read(p)
}

func TestRestoreCorruptSmall(t *testing.T) {
	fx, _ := fuzzFixture()
	snap := snapshotBytes(t, fx.View())
	vi := newVictim(t)
	vi.restoreFails(t, "empty stream", bytes.NewReader(nil))
	vi.restoreFails(t, "end marker only", bytes.NewReader([]byte{0}))
	for n := 1; n < len(snap); n++ {
		vi.restoreFails(t, fmt.Sprintf("cut to %d of %d bytes", n, len(snap)), bytes.NewReader(snap[:n]))
	}
	for i := range snap {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(snap)
			bad[i] ^= x
			vi.restoreFails(t, fmt.Sprintf("byte %d of %d ^ %#x", i, len(snap), x), bytes.NewReader(bad))
		}
	}
	// The restored state is still the victim's own, and it still works.
	mustApply(t, vi.f, 3, mkCreate("/mine/child", nil, vocab.ModePersistent))
	if _, err := vi.f.View().Exists("/mine/child"); err != nil {
		t.Errorf("victim after failed restores: %v", err)
	}
}

func TestRestoreTrailingGarbage(t *testing.T) {
	fx, _ := fuzzFixture()
	snap := snapshotBytes(t, fx.View())
	vi := newVictim(t)
	for name, tail := range map[string][]byte{
		"a zero byte":     {0},
		"three bytes":     {1, 2, 3},
		"a second stream": snap,
		"a whole block":   snapFrame([]byte("garbage"))[:12],
	} {
		vi.restoreFails(t, "stream followed by "+name, bytes.NewReader(cfCat(snap, tail)))
	}
}

type failingReader struct {
	r    io.Reader
	left int
	err  error
}

func (fr *failingReader) Read(p []byte) (int, error) {
	if fr.left <= 0 {
		return 0, fr.err
	}
	p = p[:min(len(p), fr.left)]
	n, err := fr.r.Read(p)
	fr.left -= n
	return n, err
}

func TestRestoreReaderError(t *testing.T) {
	fx, _ := fuzzFixture()
	snap := snapshotBytes(t, fx.View())
	vi := newVictim(t)
	boom := errors.New("disk on fire")
	for _, at := range []int{0, 1, 10, len(snap) / 2, len(snap) - 1} {
		err := vi.f.Restore(&failingReader{r: bytes.NewReader(snap), left: at, err: boom})
		if err == nil {
			t.Fatalf("reader failing after %d bytes: Restore succeeded", at)
		}
		if int64(vi.f.LastZxid()) != vi.zxid || vi.f.View().Digest() != vi.digest {
			t.Fatalf("reader failing after %d bytes: state changed", at)
		}
	}
}

func TestRestoreCorruptLarge(t *testing.T) {
	rs := richFSM(t, 2000)
	snap := snapshotBytes(t, rs.f.View())
	blocks := snapBlocks(t, snap)
	if len(blocks) < 3 {
		t.Fatalf("%d blocks, want several", len(blocks))
	}
	vi := newVictim(t)
	cut := func(n int) {
		if n > 0 && n < len(snap) {
			vi.restoreFails(t, fmt.Sprintf("cut to %d of %d bytes", n, len(snap)), bytes.NewReader(snap[:n]))
		}
	}
	flip := func(i int, x byte) {
		bad := bytes.Clone(snap)
		bad[i] ^= x
		vi.restoreFails(t, fmt.Sprintf("byte %d of %d ^ %#x", i, len(snap), x), bytes.NewReader(bad))
	}
	for _, b := range blocks {
		for _, at := range []int{b.start, b.payload, b.crc, b.end} {
			for d := -1; d <= 1; d++ {
				cut(at + d)
			}
		}
		for _, at := range []int{b.start, b.payload, b.payload + 1, (b.payload + b.crc) / 2, b.crc - 1, b.crc, b.end - 1} {
			flip(at, 0x01)
			flip(at, 0x80)
		}
	}
	cut(len(snap) - 1) // everything but the end marker
	r := rand.New(rand.NewPCG(1, 2))
	for range 60 {
		flip(r.IntN(len(snap)), byte(1+r.IntN(255)))
	}
}

// TestRestoreBadRecords forges well-framed streams (the checksums match) whose
// records are wrong.
func TestRestoreBadRecords(t *testing.T) {
	open := vocab.ACL{Perms: vocab.PermAll, ID: vocab.AnyoneID}
	var zeroF snapFields
	eph := func(owner int64) snapFields { f := zeroF; f[5] = owner; return f }
	// valid is a root with /a, /a/e (ephemeral of session 5) and /b.
	valid := func() *snapBuilder {
		s := (&snapBuilder{}).header(1, 9, 1, 4, 1).session(5, 1000, "pw").acl(open)
		s.node("", 0, zeroF, []byte{}, 2).node("a", 0, zeroF, nil, 1).node("e", 0, eph(5), nil, 0).node("b", 0, zeroF, []byte("x"), 0)
		return s.end()
	}
	f := New()
	if err := f.Restore(bytes.NewReader(snapFrame(valid().b))); err != nil {
		t.Fatalf("the hand-built stream does not restore: %v", err)
	}
	if got := f.View().GetEphemerals(5, "/"); !slices.Equal(got, []string{"/a/e"}) {
		t.Fatalf("hand-built stream restored as %q", got)
	}
	// The same records split across blocks restore too.
	vb := valid().b
	if err := New().Restore(bytes.NewReader(snapFrame(vb[:len(vb)-1], vb[len(vb)-1:]))); err != nil {
		t.Fatalf("the end record in a block of its own: %v", err)
	}

	root := func(s *snapBuilder, kids uint64) *snapBuilder { return s.acl(open).node("", 0, zeroF, nil, kids) }
	hdr := func(nodes, sessions uint64) *snapBuilder { return (&snapBuilder{}).header(1, 1, 1, nodes, sessions) }
	cases := map[string][]byte{
		"bad magic":               append([]byte("COORDSNQ"), valid().b[8:]...),
		"format 2":                append(append([]byte("COORDSNP"), 2), valid().b[9:]...),
		"header only":             hdr(1, 0).b,
		"header cut":              []byte("COORDSNP\x01\x01"),
		"no end record":           root(hdr(1, 0), 0).b,
		"unknown tag":             append(root(hdr(1, 0), 0).b, 9),
		"end record not last":     append(root(hdr(1, 0), 0).end().b, 0),
		"node count too high":     root(hdr(2, 0), 0).end().b,
		"node count too low":      root(hdr(1, 0), 1).node("a", 0, zeroF, nil, 0).end().b,
		"missing session":         root(hdr(1, 1), 0).end().b,
		"sessions out of order":   root(hdr(1, 2).session(7, 1, "").session(6, 1, ""), 0).end().b,
		"duplicate session":       root(hdr(1, 2).session(7, 1, "").session(7, 1, ""), 0).end().b,
		"timeout past int32":      root(hdr(1, 1).sv(7).sv(1<<31).str(""), 0).end().b,
		"acl index out of range":  hdr(1, 0).acl(open).node("", 1, zeroF, nil, 0).end().b,
		"node before any acl":     hdr(1, 0).node("", 0, zeroF, nil, 0).end().b,
		"root with a name":        hdr(1, 0).acl(open).node("r", 0, zeroF, nil, 0).end().b,
		"child without a name":    root(hdr(2, 0), 1).node("", 0, zeroF, nil, 0).end().b,
		"child name with a slash": root(hdr(2, 0), 1).node("a/b", 0, zeroF, nil, 0).end().b,
		"children out of order":   root(hdr(3, 0), 2).node("b", 0, zeroF, nil, 0).node("a", 0, zeroF, nil, 0).end().b,
		"duplicate child":         root(hdr(3, 0), 2).node("a", 0, zeroF, nil, 0).node("a", 0, zeroF, nil, 0).end().b,
		"missing children":        root(hdr(2, 0), 2).node("a", 0, zeroF, nil, 0).end().b,
		"version past int32":      root(hdr(2, 0), 1).node("a", 0, snapFields{6: 1 << 31}, nil, 0).end().b,
		"cversion below int32":    root(hdr(2, 0), 1).node("a", 0, snapFields{7: -1<<31 - 1}, nil, 0).end().b,
		"ephemeral with children": root(hdr(3, 1).session(5, 1, ""), 1).node("e", 0, eph(5), nil, 1).node("x", 0, zeroF, nil, 0).end().b,
		"ephemeral of no session": root(hdr(2, 0), 1).node("e", 0, eph(5), nil, 0).end().b,
		"data past the record":    append(root(hdr(2, 0), 1).b, 2, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50, 'x'),
		"acl entries cut":         append(hdr(1, 0).b, 1, 3, 31),
	}
	vi := newVictim(t)
	for name, payload := range cases {
		vi.restoreFails(t, name, bytes.NewReader(snapFrame(payload)))
	}
	// A block longer than any writer makes, and one claiming more than the
	// stream holds.
	vi.restoreFails(t, "huge block length", bytes.NewReader(cfCat(cfUv(1<<40), []byte("xx"))))
	vi.restoreFails(t, "block past the end", bytes.NewReader(cfCat(cfUv(100), []byte("COORDSNP"))))
}

// TestRestoreForgedCountsBounded: a short, well-framed stream whose records
// claim huge child and session counts fails without allocating for the
// claims, as DecodeCommand refuses to (decoder.count). Here 101 nested
// znodes of 19 bytes each claim 2^31-1 children apiece.
func TestRestoreForgedCountsBounded(t *testing.T) {
	s := (&snapBuilder{}).header(1, 1, 1, 101, 0).acl(vocab.OpenACLUnsafe...)
	s.node("", 0, snapFields{}, nil, math.MaxInt32)
	for range 100 {
		s.node("a", 0, snapFields{}, nil, math.MaxInt32)
	}
	kids := snapFrame(s.b)
	sessions := snapFrame((&snapBuilder{}).header(1, 1, 1, 1, 1<<62).session(1, 1, "").b)
	for name, stream := range map[string][]byte{"children": kids, "sessions": sessions} {
		var err error
		got := allocatedBytes(1, func() { err = New().Restore(bytes.NewReader(stream)) })
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: err = %v", name, err)
		}
		if limit := float64(4 << 20); got > limit {
			t.Errorf("%s: restoring %d bytes allocated %.0f MiB", name, len(stream), got/(1<<20))
		}
	}
}

// TestSnapshotCarriesTheClock: epoch, counter and the last raft term survive
// a snapshot, including a counter about to roll into the next epoch.
func TestSnapshotCarriesTheClock(t *testing.T) {
	f := New()
	mustApply(t, f, 5, mkCreate("/x", nil, vocab.ModePersistent))
	snap := snapshotBytes(t, f.View())
	payloads := snapPayloads(t, snap)
	hdr := payloads[0]
	const magic = len("COORDSNP") + 1
	d := hdr[magic:]
	var vals [5]uint64 // epoch, counter, last term, #znodes, #sessions
	for i := range vals {
		v, n := binary.Uvarint(d)
		vals[i], d = v, d[n:]
	}
	if vals[0] != 1 || vals[1] != 1 || vals[2] != 5 {
		t.Fatalf("header clock %v, want epoch 1, counter 1, term 5", vals[:3])
	}
	vals[1] = math.MaxUint32 - 1
	nh := append([]byte(nil), hdr[:magic]...)
	for _, v := range vals {
		nh = binary.AppendUvarint(nh, v)
	}
	payloads[0] = append(nh, d...)
	g := restoreBytes(t, snapFrame(payloads...))
	if got := g.LastZxid(); got.Epoch() != 1 || got.Counter() != math.MaxUint32-1 {
		t.Fatalf("restored clock at %v", got)
	}
	for _, want := range [][2]uint32{{1, math.MaxUint32}, {2, 1}, {2, 2}} {
		r, _ := g.Apply(5, &Command{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: "/x", Version: -1}})
		if r.Zxid.Epoch() != want[0] || r.Zxid.Counter() != want[1] {
			t.Fatalf("zxid %v, want epoch %d counter %d", r.Zxid, want[0], want[1])
		}
	}
	// The last term came along: term 5 again stays in the epoch; term 4 is
	// older and stays too; term 6 starts a new one.
	for _, c := range []struct {
		term  uint64
		epoch uint32
	}{{5, 2}, {4, 2}, {6, 3}} {
		r, _ := g.Apply(c.term, &Command{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: "/x", Version: -1}})
		if r.Zxid.Epoch() != c.epoch {
			t.Errorf("term %d: zxid %v, want epoch %d", c.term, r.Zxid, c.epoch)
		}
	}
}

type limitWriter struct {
	left    int
	written int
}

var errWriterFull = errors.New("writer full")

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left, w.written = 0, w.written+n
		return n, errWriterFull
	}
	w.left -= len(p)
	w.written += len(p)
	return len(p), nil
}

func TestWriteToWriterErrors(t *testing.T) {
	rs := richFSM(t, 300)
	v := rs.f.View()
	full := int64(len(snapshotBytes(t, v)))
	for _, limit := range []int{0, 1, 100, 70_000, int(full) / 2, int(full) - 1} {
		w := &limitWriter{left: limit}
		n, err := v.WriteTo(w)
		if !errors.Is(err, errWriterFull) {
			t.Errorf("limit %d: err %v, want the writer's error", limit, err)
		}
		if n != int64(w.written) {
			t.Errorf("limit %d: WriteTo says %d bytes, writer took %d", limit, n, w.written)
		}
	}
	w := &limitWriter{left: int(full)}
	if n, err := v.WriteTo(w); err != nil || n != full {
		t.Errorf("exact fit: %d, %v", n, err)
	}
}

// TestSnapshotIsDeterministic: the same commands give the same bytes,
// whatever views were taken in between.
func TestSnapshotIsDeterministic(t *testing.T) {
	build := func(views bool) []byte {
		m := newRefModel(16)
		g := newCmdGen(3, m)
		f := New()
		for i := 0; i < 400; i++ {
			term, c := g.next()
			m.apply(term, c)
			f.Apply(term, c)
			if views && i%3 == 0 {
				f.View()
			}
		}
		return snapshotBytes(t, f.View())
	}
	a, b := build(false), build(true)
	if !bytes.Equal(a, b) {
		t.Fatal("the same commands gave different snapshots")
	}
}

// ---------------------------------------------------------------------------

func FuzzRestore(f *testing.F) {
	fx, _ := fuzzFixture()
	small := richFSM(f, 40)
	for _, v := range []*View{New().View(), fx.View()} {
		snap := snapshotBytes(f, v)
		f.Add(false, snap)
		f.Add(true, bytes.Join(snapPayloads(f, snap), nil))
	}
	// The rich state without its 1 MiB node, to keep the corpus small.
	mustApply(f, small.f, 9, mkDelete("/big"))
	f.Add(true, bytes.Join(snapPayloads(f, snapshotBytes(f, small.f.View())), nil))

	f.Fuzz(func(t *testing.T, framed bool, in []byte) {
		stream := in
		if framed {
			stream = snapFrame(in)
		}
		vi := newVictim(t)
		err := vi.f.Restore(bytes.NewReader(stream))
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
			}
			if int64(vi.f.LastZxid()) != vi.zxid || vi.f.View().Digest() != vi.digest || dumpView(vi.f.View()) != vi.dump {
				t.Fatal("a failed Restore changed the state")
			}
			return
		}
		v := vi.f.View()
		if v.LastZxid() != vi.f.LastZxid() {
			t.Fatalf("stale view after Restore: %v, FSM at %v", v.LastZxid(), vi.f.LastZxid())
		}
		for _, s := range v.Sessions() {
			if e := v.GetEphemerals(s.ID, "/"); !slices.IsSorted(e) || len(e) != s.Ephemerals {
				t.Fatalf("session %#x: ephemerals %q (count %d)", s.ID, e, s.Ephemerals)
			}
		}
		if c := v.ContainerCandidates(); !slices.IsSorted(c) {
			t.Fatalf("container candidates out of order: %q", c)
		}
		// A restored state snapshots to a canonical stream and restores to
		// the same state again.
		again := snapshotBytes(t, v)
		g := restoreBytes(t, again)
		if g.View().Digest() != v.Digest() || !bytes.Equal(snapshotBytes(t, g.View()), again) {
			t.Fatal("a restored state does not survive another round trip")
		}
		if a, b := dumpView(v), dumpView(g.View()); a != b {
			t.Fatalf("second round trip reads differently: %s", dumpDiff(a, b))
		}
		// It keeps working: close every session, clean up, compare.
		cmds := []Command{}
		for _, s := range v.Sessions() {
			cmds = append(cmds, Command{Type: CmdCloseSession, Session: s.ID})
		}
		for _, p := range v.ContainerCandidates() {
			cmds = append(cmds, Command{Type: CmdDeleteContainer, Op: Op{Type: CmdDeleteContainer, Path: p}})
		}
		cmds = append(cmds, mkCreate("/zz", nil, vocab.ModePersistentSequential))
		for _, c := range cmds {
			r1, t1, p1 := applyRecover(vi.f, 1, &c)
			r2, t2, p2 := applyRecover(g, 1, &c)
			if p1 != nil || p2 != nil {
				t.Fatalf("%s panicked: %v / %v", describeCmd(&c), p1, p2)
			}
			if !reflect.DeepEqual(r1, r2) || !sameTriggers(t1, t2) {
				t.Fatalf("%s differs:\n  %+v %v\n  %+v %v", describeCmd(&c), r1, t1, r2, t2)
			}
		}
	})
}

// TestRestoreAllocatesLittleBeyondTheTree: a restore allocates little more
// than what the restored tree keeps. Parents of many children collect them in a
// buffer per depth that later parents reuse, grown by doubling; a slice
// per parent grown by append left about five times its final size as
// garbage, which a restore with the collector off takes as fresh memory.
func TestRestoreAllocatesLittleBeyondTheTree(t *testing.T) {
	snap := func() []byte { // the source tree is garbage once it returns
		src := New()
		data := bytes.Repeat([]byte("d"), 100)
		for p := range 4 {
			parent := fmt.Sprintf("/p%d", p)
			mustApply(t, src, 1, mkCreate(parent, nil, vocab.ModePersistent))
			for k := range 20_000 {
				mustApply(t, src, 1, mkCreate(fmt.Sprintf("%s/%019d", parent, k), data, vocab.ModePersistent))
			}
		}
		return snapshotBytes(t, src.View())
	}()

	var dst *FSM
	before := liveHeap()
	allocated := allocatedBytes(1, func() {
		dst = New()
		if err := dst.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
	})
	kept := float64(liveHeap() - before)
	if got := dst.View().NodeCount(); got != 4+4+4*20_000 {
		t.Fatalf("restored %d znodes", got)
	}
	// What is not the tree is the decoder's record batch, one children
	// buffer per depth and the btrees' upper levels: 1.29x here, where a
	// slice grown per parent made it 1.69x.
	if allocated > 1.45*kept {
		t.Errorf("restore allocated %.1f MB for a tree that keeps %.1f MB (%.2fx)", allocated/1e6, kept/1e6, allocated/kept)
	}
	t.Logf("restore allocated %.1f MB for a tree that keeps %.1f MB (%.2fx)", allocated/1e6, kept/1e6, allocated/kept)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(snap)
}
