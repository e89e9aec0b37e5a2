package fsm

// Table tests for Apply: every command, every error and its precedence.
//
// The expectations are Apache ZooKeeper 3.8's, checked against a running
// 3.8.0 standalone server (kazoo 2.8, raw requests) and against
// PrepRequestProcessor / DataTree / DataNode. Raw zxids differ between the two
// systems, so rows state relations ("czxid is the zxid of this create").
// Where coord deliberately differs from ZooKeeper the row says so in a
// comment starting "coord:".
//
// Stat.Cversion is compared only by TestApplyCversionAsZooKeeperReportsIt and
// TestViewFreshTree: ZooKeeper reports 2*creates-numChildren there (DataNode.
// copyStat) and one difference should fail one test, not every table.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"coord/vocab"
	"coord/zxid"
)

// oneMiB is ZooKeeper's default jute.maxbuffer, the data size tests use
// for "large".
const oneMiB = 1 << 20

// apT0 is the leader's clock at the first fixture command (ms).
const apT0 = int64(1_700_000_000_000)

// Caller identities. The digest ids are the ones ZooKeeper 3.8 derived for
// addauth digest alice:secret and bob:pw.
var (
	apAlice = vocab.Id{Scheme: "digest", ID: "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="}
	apBob   = vocab.Id{Scheme: "digest", ID: "bob:ikIaKsbtGweaHnb/jKn7OHqbunM="}
	apSuper = vocab.Id{Scheme: "super", ID: ""}
	apLocal = vocab.Id{Scheme: "ip", ID: "127.0.0.1"}
)

// apRig drives one FSM. It stamps every command with a leader clock that
// advances 1 ms per command (unless the command carries a Time), checks the
// zxid rule on every command, and keeps the log so that a twin can replay it.
type apRig struct {
	t       *testing.T
	f       *FSM
	term    uint64
	now     int64
	log     []apEntry
	epoch   uint32 // the zxid clock as the rig expects it
	counter uint32
	last    uint64
}

type apEntry struct {
	term uint64
	cmd  Command
}

func newApRig(t *testing.T) *apRig {
	return &apRig{t: t, f: New(), term: 1, now: apT0}
}

// apply applies c in the rig's current term and checks that it consumed
// exactly one zxid: counter+1 in the same term, a new epoch with counter 1
// in a newer term (zxid.Clock, DESIGN.md "A write").
func (r *apRig) apply(c Command) (Result, []Trigger) {
	r.t.Helper()
	if c.Time == 0 {
		r.now++
		c.Time = r.now
	} else {
		r.now = c.Time
	}
	if r.epoch == 0 || r.term > r.last {
		r.epoch++
		r.counter = 1
		r.last = max(r.last, r.term)
	} else {
		r.counter++
	}
	want := zxid.New(r.epoch, r.counter)
	cmd := c
	res, trig := r.f.Apply(r.term, &cmd)
	r.log = append(r.log, apEntry{r.term, c})
	if res.Zxid != want {
		r.t.Fatalf("%v: zxid %v, want %v (one zxid per command)", c.Type, res.Zxid, want)
	}
	if got := r.f.LastZxid(); got != want {
		r.t.Fatalf("%v: LastZxid %v after the command, want %v", c.Type, got, want)
	}
	return res, trig
}

// ok applies c and fails the test unless it succeeded.
func (r *apRig) ok(c Command) Result {
	r.t.Helper()
	res, _ := r.apply(c)
	if res.Err != nil {
		r.t.Fatalf("%v %s: %v", c.Type, c.Op.Path, res.Err)
	}
	return res
}

// zxid returns the zxid of the last command.
func (r *apRig) zxid() int64 { return int64(zxid.New(r.epoch, r.counter)) }

// twinDigest replays the log on a fresh FSM with the last command replaced
// by a command that surely fails and changes nothing but the zxid clock (a
// check of a missing node), and returns that state's digest. A failed command
// must leave exactly that state behind.
func (r *apRig) twinDigest() [32]byte {
	r.t.Helper()
	f := New()
	for i, e := range r.log {
		c := e.cmd
		if i == len(r.log)-1 {
			c = Command{Type: CmdCheck, Time: c.Time, Op: Op{Type: CmdCheck, Path: "/no-such-node-in-apply-test", Version: -1}}
		}
		if res, _ := f.Apply(e.term, &c); i == len(r.log)-1 && vocab.CodeOf(res.Err) != vocab.NoNode {
			r.t.Fatalf("twin's reference failure gave %v", res.Err)
		}
	}
	return f.View().Digest()
}

// unchanged checks that the last command changed nothing but the zxid.
func (r *apRig) unchanged(what string) {
	r.t.Helper()
	if got, want := r.f.View().Digest(), r.twinDigest(); got != want {
		r.t.Errorf("%s: state changed (digest %x, want %x as after a no-op failure)", what, got[:6], want[:6])
	}
}

func (r *apRig) session() int64 {
	r.t.Helper()
	return r.ok(Command{Type: CmdCreateSession, Timeout: 30000, Password: []byte("pw")}).SessionID
}

func (r *apRig) stat(path string) vocab.Stat {
	r.t.Helper()
	st, err := r.f.View().Exists(path)
	if err != nil {
		r.t.Fatalf("exists %s: %v", path, err)
	}
	return st
}

func (r *apRig) missing(path string) {
	r.t.Helper()
	if _, err := r.f.View().Exists(path); vocab.CodeOf(err) != vocab.NoNode {
		r.t.Errorf("exists %s: %v, want NoNode", path, err)
	}
}

// Command builders. Nodes get OpenACLUnsafe unless a row says otherwise.

func apCreate(path, data string, mode vocab.CreateMode) Command {
	return Command{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: path, Data: []byte(data), ACL: vocab.OpenACLUnsafe, Mode: mode}}
}

func apCreateTTL(path string, mode vocab.CreateMode, ttl int64) Command {
	c := apCreate(path, "", mode)
	c.Op.TTL = ttl
	return c
}

func apCreateACL(path string, acl ...vocab.ACL) Command {
	c := apCreate(path, "", vocab.ModePersistent)
	c.Op.ACL = acl
	return c
}

func apDelete(path string, version int32) Command {
	return Command{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: path, Version: version}}
}

func apSet(path, data string, version int32) Command {
	return Command{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: path, Data: []byte(data), Version: version}}
}

func apSetACL(path string, version int32, acl ...vocab.ACL) Command {
	return Command{Type: CmdSetACL, Op: Op{Type: CmdSetACL, Path: path, ACL: acl, Version: version}}
}

func apCheck(path string, version int32) Command {
	return Command{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: path, Version: version}}
}

func apDelC(path string) Command {
	return Command{Type: CmdDeleteContainer, Op: Op{Type: CmdDeleteContainer, Path: path}}
}

// apMulti makes a multi of the ops of single-op commands.
func apMulti(cmds ...Command) Command {
	c := Command{Type: CmdMulti, Ops: []Op{}}
	for _, x := range cmds {
		c.Ops = append(c.Ops, x.Op)
	}
	return c
}

func apAs(session int64, c Command) Command { c.Session = session; return c }

func apAuth(c Command, ids ...vocab.Id) Command { c.Auth = ids; return c }

func apACL(p vocab.Perm, scheme, id string) vocab.ACL {
	return vocab.ACL{Perms: p, ID: vocab.Id{Scheme: scheme, ID: id}}
}

// apSameStat compares every field but Cversion (see the file comment).
func apSameStat(t *testing.T, what string, got, want vocab.Stat) {
	t.Helper()
	got.Cversion, want.Cversion = 0, 0
	if got != want {
		t.Errorf("%s: stat\n got %+v\nwant %+v", what, got, want)
	}
}

// apSameTriggers compares triggers by path, type and zxid (the ACLs they
// carry are checked against the model in model_test.go).
func apSameTriggers(t *testing.T, what string, got, want []Trigger) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b Trigger) bool { return a.Path == b.Path && a.Type == b.Type && a.Zxid == b.Zxid }) {
		t.Errorf("%s: triggers\n got %v\nwant %v", what, got, want)
	}
}

func apCode(t *testing.T, what string, err error, want vocab.Code) {
	t.Helper()
	if got := vocab.CodeOf(err); got != want {
		t.Errorf("%s: code %d (%v), want %d (%v)", what, got, err, want, want)
	}
	if want != vocab.OK {
		var e *vocab.Error
		if !errors.As(err, &e) || !errors.Is(err, want) {
			t.Errorf("%s: error %#v is not an *Error with code %v", what, err, want)
		}
	}
}

// The fixture most tables start from: fixed session ids and zxids, term 1.
const apFixtureLen = 12

var (
	apS1 = int64(zxid.New(1, 1)) // createSession: its id is its zxid
	apS2 = int64(zxid.New(1, 2))
	// The command under test in a fixture row runs at zxid apRowZ and time apRowTime.
	apRowZ    = apZ(apFixtureLen + 1)
	apRowTime = apTime(apFixtureLen + 1)
	// Every fixture node but /ttl is open to everyone.
	apNoCreate = vocab.ReadACLUnsafe // no CREATE on it, nor DELETE
	apNoDelete = []vocab.ACL{apACL(vocab.PermAll&^vocab.PermDelete, "world", "anyone")}
	apLocked   = []vocab.ACL{{Perms: vocab.PermAll, ID: apAlice}}
)

// apZ is the zxid of the n-th command in term 1; apTime its time.
func apZ(n int) int64    { return int64(zxid.New(1, uint32(n))) }
func apTime(n int) int64 { return apT0 + int64(n) }

// newApFixture builds:
//
//	 1 createSession -> S1          7 /nodelete   ALL but DELETE
//	2 createSession -> S2          8 /nodelete/kid
//	3 /a "a"                       9 /locked     digest alice ALL, "s"
//	4 /a/b "b"                    10 /locked/kid (by alice)
//	5 /eph "e", ephemeral of S1   11 /ctr        container
//	6 /nocreate  READ only        12 /ttl        TTL 1000 ms
//
// The root has had 7 children created (its next sequence number); /a has 1.
func newApFixture(t *testing.T) *apRig {
	r := newApRig(t)
	if s := r.session(); s != apS1 {
		t.Fatalf("first session id %#x, want its zxid %#x", s, apS1)
	}
	if s := r.session(); s != apS2 {
		t.Fatalf("second session id %#x, want %#x", s, apS2)
	}
	r.ok(apCreate("/a", "a", vocab.ModePersistent))
	r.ok(apCreate("/a/b", "b", vocab.ModePersistent))
	r.ok(apAs(apS1, apCreate("/eph", "e", vocab.ModeEphemeral)))
	r.ok(apCreateACL("/nocreate", apNoCreate...))
	r.ok(apCreateACL("/nodelete", apNoDelete...))
	r.ok(apCreate("/nodelete/kid", "", vocab.ModePersistent))
	locked := apCreateACL("/locked", apLocked...)
	locked.Op.Data = []byte("s")
	r.ok(apAuth(locked, apAlice))
	r.ok(apAuth(apCreate("/locked/kid", "", vocab.ModePersistent), apAlice))
	r.ok(apCreate("/ctr", "", vocab.ModeContainer))
	r.ok(apCreateTTL("/ttl", vocab.ModePersistentTTL, 1000))
	if len(r.log) != apFixtureLen {
		t.Fatalf("fixture has %d commands, want %d", len(r.log), apFixtureLen)
	}
	return r
}

// apErrRow is a command that must fail with code on the fixture.
type apErrRow struct {
	name string
	cmd  Command
	code vocab.Code
}

// runErrRows applies each row's command to a fresh fixture and checks the
// code, that the zxid was consumed (apRig.apply), that nothing fired and
// that nothing changed.
func runErrRows(t *testing.T, rows []apErrRow) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newApFixture(t)
			res, trig := r.apply(row.cmd)
			apCode(t, "result", res.Err, row.code)
			if len(trig) != 0 {
				t.Errorf("a failed command fired %v", trig)
			}
			if res.Path != "" || res.Stat != (vocab.Stat{}) {
				t.Errorf("a failed command returned path %q stat %+v", res.Path, res.Stat)
			}
			r.unchanged(row.name)
		})
	}
}

func TestApplyZxidEveryCommand(t *testing.T) {
	// apRig.apply checks the zxid of every command; this drives one of each
	// kind, failed ones included (ZooKeeper logs an error txn for those), and
	// crosses raft terms.
	r := newApFixture(t)
	r.apply(apCreate("/z", "", vocab.ModePersistent))
	r.apply(apCreate("/z", "", vocab.ModePersistent)) // NodeExists
	r.apply(apSet("/z", "x", -1))
	r.apply(apSet("/z", "x", 7)) // BadVersion
	r.term = 3                   // a newer term: epoch 2 (epochs follow terms in order, need not equal them)
	r.apply(apSetACL("/z", -1, vocab.OpenACLUnsafe...))
	r.apply(apCheck("/z", 1))
	r.apply(apMulti(apCheck("/z", 1), apDelete("/z", 5))) // fails
	r.apply(apMulti())
	r.term = 2 // an older term never moves the epoch back
	r.apply(apDelC("/ctr"))
	r.apply(apDelete("/z", -1))
	r.apply(apAs(0x7777, apDelete("/a/b", -1))) // unknown session
	r.apply(Command{Type: CmdCreateSession, Timeout: 0})
	r.term = 7
	r.apply(Command{Type: CmdCloseSession, Session: apS1})
	r.apply(Command{Type: CmdCloseSession, Session: apS1}) // already gone
	r.apply(Command{Type: CmdType(0)})
	r.apply(Command{Type: CmdType(200)})
	if got, want := r.f.LastZxid(), zxid.New(3, 4); got != want {
		t.Errorf("LastZxid %v, want %v", got, want)
	}
	if got := r.f.View().LastZxid(); got != zxid.New(3, 4) {
		t.Errorf("View().LastZxid %v, want %v", got, zxid.New(3, 4))
	}
}

func TestApplyZxidCounterOverflowStartsEpoch(t *testing.T) {
	// ZooKeeper forces an election when the counter would wrap
	// (ZOOKEEPER-2789); coord starts a new epoch inside apply.
	f := New()
	f.s.clock = zxid.Clock{Epoch: 5, Counter: zxid.MaxCounter - 1, LastTerm: 9}
	for _, want := range []zxid.Zxid{zxid.New(5, zxid.MaxCounter), zxid.New(6, 1), zxid.New(6, 2)} {
		res, _ := f.Apply(9, &Command{Type: CmdCheck, Op: Op{Type: CmdCheck, Path: "/", Version: -1}})
		if res.Zxid != want || res.Err != nil {
			t.Fatalf("zxid %v err %v, want %v", res.Zxid, res.Err, want)
		}
	}
}

func TestApplyUnknownCommandType(t *testing.T) {
	for _, typ := range []CmdType{0, cmdTypeEnd, 255} {
		r := newApFixture(t)
		res, trig := r.apply(Command{Type: typ})
		apCode(t, typ.String(), res.Err, vocab.Unimplemented)
		if len(trig) != 0 {
			t.Errorf("%v fired %v", typ, trig)
		}
		r.unchanged(typ.String())
	}
}

func TestApplyEntry(t *testing.T) {
	f := New()
	c := apCreate("/x", "d", vocab.ModePersistent)
	c.Time = apT0
	res, trig, err := f.ApplyEntry(1, c.Encode(nil))
	if err != nil || res.Err != nil || res.Path != "/x" || len(trig) != 2 {
		t.Fatalf("ApplyEntry = %+v, %v, %v", res, trig, err)
	}
	// An entry this server cannot decode is not a command: it must stop the
	// server, so it neither consumes a zxid nor changes anything.
	before := f.View().Digest()
	if _, _, err := f.ApplyEntry(1, []byte{commandFormat, byte(CmdCreate), 0xff}); !errors.Is(err, ErrDecode) {
		t.Fatalf("garbage entry: err %v, want ErrDecode", err)
	}
	if f.LastZxid() != res.Zxid || f.View().Digest() != before {
		t.Errorf("a rejected entry changed the state")
	}
}

func TestApplySessions(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		r := newApRig(t)
		pw := []byte("secret")
		res, trig := r.apply(Command{Type: CmdCreateSession, Timeout: 4000, Password: pw})
		if res.Err != nil || res.SessionID != int64(res.Zxid) {
			t.Fatalf("createSession = %+v; want the zxid as the id", res)
		}
		if len(trig) != 0 {
			t.Errorf("createSession fired %v", trig)
		}
		pw[0] = 'X' // the FSM keeps its own copy
		info, ok := r.f.View().Session(res.SessionID)
		if !ok || info.Timeout != 4000 || string(info.Password) != "secret" || info.Ephemerals != 0 {
			t.Errorf("session = %+v, %v", info, ok)
		}
	})
	t.Run("bad timeout", func(t *testing.T) {
		for _, to := range []int32{0, -1} {
			r := newApRig(t)
			res, _ := r.apply(Command{Type: CmdCreateSession, Timeout: to})
			apCode(t, fmt.Sprint("timeout ", to), res.Err, vocab.BadArguments)
			if res.SessionID != 0 || len(r.f.View().Sessions()) != 0 {
				t.Errorf("timeout %d made session %#x", to, res.SessionID)
			}
			r.unchanged("bad timeout")
		}
	})
	t.Run("close removes ephemerals in path order", func(t *testing.T) {
		// ZooKeeper deletes a closing session's ephemerals in one txn (one
		// zxid), setting each parent's pzxid to it (verified on 3.8.0).
		// coord: the order of the deletes and triggers is path order;
		// ZooKeeper's is its HashSet's.
		r := newApFixture(t)
		r.ok(apCreate("/cs", "", vocab.ModePersistent))
		r.ok(apAs(apS1, apCreate("/cs/b", "", vocab.ModeEphemeral)))
		r.ok(apAs(apS1, apCreate("/cs/a", "", vocab.ModeEphemeral)))
		q := r.ok(apAs(apS1, apCreate("/cs/q-", "", vocab.ModeEphemeralSequential))).Path
		r.ok(apAs(apS2, apCreate("/cs/other", "", vocab.ModeEphemeral)))
		r.ok(apAs(apS1, apCreate("/z", "", vocab.ModeEphemeral)))
		if got := r.f.View().GetEphemerals(apS1, "/"); !slices.Equal(got, []string{"/cs/a", "/cs/b", q, "/eph", "/z"}) {
			t.Fatalf("ephemerals of S1 before close: %v", got)
		}
		csBefore := r.stat("/cs")
		res, trig := r.apply(Command{Type: CmdCloseSession, Session: apS1})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		z := r.zxid()
		want := []Trigger{}
		for _, p := range []string{"/cs/a", "/cs/b", q, "/eph", "/z"} {
			parent, _ := splitPath(p)
			want = append(want, Trigger{Path: p, Type: vocab.EventNodeDeleted, Zxid: z}, Trigger{Path: parent, Type: vocab.EventNodeChildrenChanged, Zxid: z})
			r.missing(p)
		}
		apSameTriggers(t, "closeSession", trig, want)
		csAfter := r.stat("/cs")
		if csAfter.Pzxid != z || csAfter.NumChildren != 1 || csAfter.Mzxid != csBefore.Mzxid {
			t.Errorf("/cs after close: %+v (pzxid want %#x)", csAfter, z)
		}
		if r.stat("/").Pzxid != z {
			t.Errorf("root pzxid %#x, want %#x", r.stat("/").Pzxid, z)
		}
		if _, ok := r.f.View().Session(apS1); ok {
			t.Errorf("session still there")
		}
		if got := r.f.View().GetEphemerals(apS1, ""); len(got) != 0 || got == nil {
			t.Errorf("GetEphemerals of a closed session = %#v, want empty", got)
		}
		if got := r.f.View().GetEphemerals(apS2, "/"); !slices.Equal(got, []string{"/cs/other"}) {
			t.Errorf("S2 ephemerals %v", got)
		}
		// Its sequence counter is not reset by the deletes.
		if p := r.ok(apCreate("/cs/q-", "", vocab.ModePersistentSequential)).Path; p != "/cs/q-0000000004" {
			t.Errorf("next sequential name %s, want /cs/q-0000000004", p)
		}
	})
	t.Run("close without ephemerals", func(t *testing.T) {
		r := newApFixture(t)
		res, trig := r.apply(Command{Type: CmdCloseSession, Session: apS2})
		if res.Err != nil || len(trig) != 0 {
			t.Errorf("close S2 = %v, %v", res.Err, trig)
		}
		if len(r.f.View().Sessions()) != 1 {
			t.Errorf("sessions %v", r.f.View().Sessions())
		}
	})
	t.Run("close unknown session", func(t *testing.T) {
		// A leader that proposes an expiry twice: SessionExpired, nothing changes.
		for _, id := range []int64{apS1 + 100, 0} {
			r := newApFixture(t)
			res, trig := r.apply(Command{Type: CmdCloseSession, Session: id})
			apCode(t, "close unknown", res.Err, vocab.SessionExpired)
			if len(trig) != 0 {
				t.Errorf("fired %v", trig)
			}
			r.unchanged("close unknown")
		}
		r := newApFixture(t)
		r.ok(Command{Type: CmdCloseSession, Session: apS1})
		res, _ := r.apply(Command{Type: CmdCloseSession, Session: apS1})
		apCode(t, "close twice", res.Err, vocab.SessionExpired)
		r.unchanged("close twice")
	})
	t.Run("commands from unknown session", func(t *testing.T) {
		// ZooKeeper's checkSession fails in PrepRequestProcessor and it logs
		// an error txn: SessionExpired, one zxid, no change.
		runErrRows(t, []apErrRow{
			{"create", apAs(0x5eed, apCreate("/x", "", vocab.ModePersistent)), vocab.SessionExpired},
			{"ephemeral", apAs(0x5eed, apCreate("/x", "", vocab.ModeEphemeral)), vocab.SessionExpired},
			// coord: the session is checked first; ZooKeeper checks the
			// create mode and the ttl before the session.
			{"invalid create", apAs(0x5eed, apCreate("bad", "", 99)), vocab.SessionExpired},
			{"delete", apAs(0x5eed, apDelete("/a/b", -1)), vocab.SessionExpired},
			{"setData", apAs(0x5eed, apSet("/a", "x", -1)), vocab.SessionExpired},
			{"setACL", apAs(0x5eed, apSetACL("/a", -1, vocab.OpenACLUnsafe...)), vocab.SessionExpired},
			{"check", apAs(0x5eed, apCheck("/a", 0)), vocab.SessionExpired},
			{"multi", apAs(0x5eed, apMulti(apCreate("/x", "", vocab.ModePersistent))), vocab.SessionExpired},
			{"deleteContainer", apAs(0x5eed, apDelC("/ctr")), vocab.SessionExpired},
			{"closed session", apAs(apS1+1000, apSet("/a", "x", -1)), vocab.SessionExpired},
		})
	})
}

func TestApplyCreate(t *testing.T) {
	z, now := apRowZ, apRowTime
	fresh := func(data int32, owner int64) vocab.Stat {
		return vocab.Stat{Czxid: z, Mzxid: z, Pzxid: z, Ctime: now, Mtime: now, DataLength: data, EphemeralOwner: owner}
	}
	rows := []struct {
		name  string
		cmd   Command
		path  string
		stat  vocab.Stat
		acl   []vocab.ACL // stored ACL, if not OpenACLUnsafe
		check func(t *testing.T, v *View)
	}{
		{name: "persistent", cmd: apCreate("/n", "data", vocab.ModePersistent), path: "/n", stat: fresh(4, 0)},
		{name: "persistent by a session", cmd: apAs(apS2, apCreate("/n", "", vocab.ModePersistent)), path: "/n", stat: fresh(0, 0),
			check: func(t *testing.T, v *View) {
				if e := v.GetEphemerals(apS2, "/"); len(e) != 0 {
					t.Errorf("S2 ephemerals %v", e)
				}
			}},
		{name: "ephemeral", cmd: apAs(apS2, apCreate("/a/e", "x", vocab.ModeEphemeral)), path: "/a/e", stat: fresh(1, apS2),
			check: func(t *testing.T, v *View) {
				if e := v.GetEphemerals(apS2, "/"); !slices.Equal(e, []string{"/a/e"}) {
					t.Errorf("S2 ephemerals %v", e)
				}
				if s, _ := v.Session(apS2); s.Ephemerals != 1 {
					t.Errorf("session info %+v", s)
				}
			}},
		// The suffix is the parent's count of child creates before this one,
		// %010d (verified: /a has had one child, /a/b).
		{name: "persistent sequential", cmd: apCreate("/a/s-", "", vocab.ModePersistentSequential), path: "/a/s-0000000001", stat: fresh(0, 0)},
		{name: "ephemeral sequential", cmd: apAs(apS1, apCreate("/a/e-", "", vocab.ModeEphemeralSequential)), path: "/a/e-0000000001", stat: fresh(0, apS1),
			check: func(t *testing.T, v *View) {
				if e := v.GetEphemerals(apS1, "/a"); !slices.Equal(e, []string{"/a/e-0000000001"}) {
					t.Errorf("S1 ephemerals under /a: %v", e)
				}
			}},
		// ZooKeeper 3.8 shows clients ephemeralOwner 0 for containers and
		// TTL nodes (DataNode.getClientEphemeralOwner, verified); so does coord.
		{name: "container", cmd: apCreate("/c", "", vocab.ModeContainer), path: "/c", stat: fresh(0, 0),
			check: func(t *testing.T, v *View) {
				if c := v.ContainerCandidates(); slices.Contains(c, "/c") {
					t.Errorf("a never-used container is a candidate: %v", c)
				}
			}},
		{name: "ttl", cmd: apCreateTTL("/t", vocab.ModePersistentTTL, 5000), path: "/t", stat: fresh(0, 0),
			check: func(t *testing.T, v *View) {
				if e := v.ExpiredTTLs(now + 5000); slices.Contains(e, "/t") {
					t.Errorf("expired at exactly its ttl: %v", e)
				}
				if e := v.ExpiredTTLs(now + 5001); !slices.Contains(e, "/t") {
					t.Errorf("not expired after its ttl: %v", e)
				}
			}},
		{name: "ttl max", cmd: apCreateTTL("/t", vocab.ModePersistentTTL, MaxTTL), path: "/t", stat: fresh(0, 0)},
		{name: "ttl sequential", cmd: apCreateTTL("/a/t-", vocab.ModePersistentSequentialTTL, 5000), path: "/a/t-0000000001", stat: fresh(0, 0)},
		{name: "sequential under root", cmd: apCreate("/", "", vocab.ModePersistentSequential), path: "/0000000007", stat: fresh(0, 0)},
		{name: "sequential with trailing slash", cmd: apCreate("/a/", "", vocab.ModePersistentSequential), path: "/a/0000000001", stat: fresh(0, 0)},
		{name: "digest ACL", cmd: apCreateACL("/n", vocab.ACL{Perms: vocab.PermRead, ID: apBob}), path: "/n", stat: fresh(0, 0),
			acl: []vocab.ACL{{Perms: vocab.PermRead, ID: apBob}}},
		// "auth" expands to the caller's digest ids; duplicates are dropped
		// (verified: world ALL twice + auth READ as alice).
		{name: "auth ACL expanded, duplicates dropped",
			cmd:  apAuth(apCreateACL("/n", vocab.OpenACLUnsafe[0], vocab.OpenACLUnsafe[0], apACL(vocab.PermRead, "auth", "whatever")), apAlice, apLocal),
			path: "/n", stat: fresh(0, 0), acl: []vocab.ACL{vocab.OpenACLUnsafe[0], {Perms: vocab.PermRead, ID: apAlice}}},
		{name: "ip ACL", cmd: apCreateACL("/n", apACL(vocab.PermAll, "ip", "127.0.0.1")), path: "/n", stat: fresh(0, 0),
			acl: []vocab.ACL{apACL(vocab.PermAll, "ip", "127.0.0.1")}},
		// coord: a znode may hold exactly 1 MiB (servers refuse more before
		// the log, as Config.MaxDataBytes); ZooKeeper refuses a
		// packet longer than jute.maxbuffer (1 MiB - 1) by dropping the
		// connection, so it never stores a full MiB.
		{name: "exactly 1 MiB of data", cmd: apCreate("/n", strings.Repeat("x", 1<<20), vocab.ModePersistent), path: "/n", stat: fresh(1<<20, 0)},
		{name: "under a container", cmd: apCreate("/ctr/k", "", vocab.ModePersistent), path: "/ctr/k", stat: fresh(0, 0),
			check: func(t *testing.T, v *View) {
				if c := v.ContainerCandidates(); len(c) != 0 {
					t.Errorf("a container with a child is a candidate: %v", c)
				}
			}},
		{name: "ephemeral under a container", cmd: apAs(apS1, apCreate("/ctr/e", "", vocab.ModeEphemeral)), path: "/ctr/e", stat: fresh(0, apS1)},
		{name: "ephemeral under a ttl node", cmd: apAs(apS1, apCreate("/ttl/e", "", vocab.ModeEphemeral)), path: "/ttl/e", stat: fresh(0, apS1)},
		{name: "under /zookeeper", cmd: apCreate("/zookeeper/x", "", vocab.ModePersistent), path: "/zookeeper/x", stat: fresh(0, 0)},
		{name: "under /zookeeper/quota", cmd: apCreate("/zookeeper/quota/x", "", vocab.ModePersistent), path: "/zookeeper/quota/x", stat: fresh(0, 0)},
		{name: "parent ACL grants CREATE to alice", cmd: apAuth(apCreate("/locked/x", "", vocab.ModePersistent), apBob, apAlice), path: "/locked/x", stat: fresh(0, 0)},
		{name: "super bypasses the parent ACL", cmd: apAuth(apCreate("/nocreate/x", "", vocab.ModePersistent), apSuper), path: "/nocreate/x", stat: fresh(0, 0)},
		{name: "leader duty (session 0) may create persistent", cmd: apAs(0, apCreate("/n", "", vocab.ModePersistent)), path: "/n", stat: fresh(0, 0)},
		{name: "non-ASCII and space in a name", cmd: apCreate("/a/ü x", "", vocab.ModePersistent), path: "/a/ü x", stat: fresh(0, 0)},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newApFixture(t)
			parent, name := splitPath(row.path)
			pBefore := r.stat(parent)
			res, trig := r.apply(row.cmd)
			if res.Err != nil {
				t.Fatalf("create: %v", res.Err)
			}
			if res.Path != row.path {
				t.Errorf("path %q, want %q", res.Path, row.path)
			}
			apSameStat(t, "result", res.Stat, row.stat)
			apSameStat(t, "exists", r.stat(row.path), row.stat)
			apSameTriggers(t, "create", trig, []Trigger{{Path: row.path, Type: vocab.EventNodeCreated, Zxid: z}, {Path: parent, Type: vocab.EventNodeChildrenChanged, Zxid: z}})
			data, _, err := r.f.View().GetData(row.path, []vocab.Id{apSuper})
			if err != nil || !bytes.Equal(data, row.cmd.Op.Data) {
				t.Errorf("data %q, %v", data, err)
			}
			wantACL := row.acl
			if wantACL == nil {
				wantACL = vocab.OpenACLUnsafe
			}
			if acl, _, _ := r.f.View().GetACL(row.path, []vocab.Id{apSuper}); !slices.Equal(acl, wantACL) {
				t.Errorf("acl %v, want %v", acl, wantACL)
			}
			// The parent: one more child, pzxid = this zxid, data untouched.
			p := r.stat(parent)
			if p.NumChildren != pBefore.NumChildren+1 || p.Pzxid != z || p.Mzxid != pBefore.Mzxid || p.Version != pBefore.Version {
				t.Errorf("parent %s: %+v (before %+v)", parent, p, pBefore)
			}
			if kids, _, _ := r.f.View().GetChildren(parent, []vocab.Id{apSuper}); !slices.Contains(kids, name) {
				t.Errorf("children of %s: %v, no %q", parent, kids, name)
			}
			if r.f.View().NodeCount() != 4+10+1 {
				t.Errorf("NodeCount %d", r.f.View().NodeCount())
			}
			if row.check != nil {
				row.check(t, r.f.View())
			}
		})
	}
}

func TestApplyCreateErrors(t *testing.T) {
	badACL := apACL(vocab.PermAll, "world", "bob")
	runErrRows(t, []apErrRow{
		{"root exists", apCreate("/", "", vocab.ModePersistent), vocab.NodeExists},
		{"exists", apCreate("/a", "", vocab.ModePersistent), vocab.NodeExists},
		{"exists as ephemeral", apAs(apS1, apCreate("/eph", "", vocab.ModeEphemeral)), vocab.NodeExists},
		{"special node exists", apCreate("/zookeeper/quota", "", vocab.ModePersistent), vocab.NodeExists},
		{"no slash", apCreate("abc", "", vocab.ModePersistent), vocab.BadArguments},
		{"empty path", apCreate("", "", vocab.ModePersistent), vocab.BadArguments},
		{"NUL", apCreate("/a\x00b", "", vocab.ModePersistent), vocab.BadArguments},
		{"control character", apCreate("/a\x01", "", vocab.ModePersistent), vocab.BadArguments},
		{"trailing slash, parent exists", apCreate("/a/", "", vocab.ModePersistent), vocab.BadArguments},
		{"dot", apCreate("/a/.", "", vocab.ModePersistent), vocab.BadArguments},
		{"dot dot", apCreate("/a/..", "", vocab.ModePersistent), vocab.BadArguments},
		{"mode 7", apCreate("/x", "", 7), vocab.BadArguments},
		{"mode -1", apCreate("/x", "", -1), vocab.BadArguments},
		{"missing parent", apCreate("/nope/x", "", vocab.ModePersistent), vocab.NoNode},
		{"missing parent, sequential", apCreate("/nope/x-", "", vocab.ModePersistentSequential), vocab.NoNode},
		// The parent is looked up before the full path is validated.
		{"missing parent, trailing slash", apCreate("/nope/", "", vocab.ModePersistent), vocab.NoNode},
		{"empty segment", apCreate("/a//x", "", vocab.ModePersistent), vocab.NoNode},
		{"dot in the parent", apCreate("/a/./x", "", vocab.ModePersistent), vocab.NoNode},
		// ACLs are checked after the mode and the path's shape, before the
		// parent (verified: missing parent + world:bob is InvalidACL).
		{"missing parent + invalid ACL", apCreateACL("/nope/x", badACL), vocab.InvalidACL},
		{"missing parent + empty ACL", apCreateACL("/nope/x"), vocab.InvalidACL},
		{"exists + invalid ACL", apCreateACL("/a", badACL), vocab.InvalidACL},
		{"no slash + invalid ACL", apCreateACL("abc", badACL), vocab.BadArguments},
		{"bad mode + missing parent", apCreate("/nope/x", "", 7), vocab.BadArguments},
		{"auth ACL, no credentials", apCreateACL("/x", apACL(vocab.PermAll, "auth", "")), vocab.InvalidACL},
		{"auth ACL, ip only", apAuth(apCreateACL("/x", apACL(vocab.PermAll, "auth", "")), apLocal), vocab.InvalidACL},
		{"digest id without hash", apCreateACL("/x", apACL(vocab.PermAll, "digest", "nocolon")), vocab.InvalidACL},
		{"unknown scheme", apCreateACL("/x", apACL(vocab.PermAll, "kerberos", "x")), vocab.InvalidACL},
		{"bad ip", apCreateACL("/x", apACL(vocab.PermAll, "ip", "300.1.1.1")), vocab.InvalidACL},
		{"under ephemeral + invalid ACL", apCreateACL("/eph/x", badACL), vocab.InvalidACL},
		// CREATE on the parent is checked before existence and the path.
		{"no CREATE on parent", apCreate("/nocreate/x", "", vocab.ModePersistent), vocab.NoAuth},
		{"no CREATE, sequential", apCreate("/nocreate/x-", "", vocab.ModePersistentSequential), vocab.NoAuth},
		{"no CREATE, trailing slash", apCreate("/nocreate/", "", vocab.ModePersistent), vocab.NoAuth},
		{"locked parent, exists", apCreate("/locked/kid", "", vocab.ModePersistent), vocab.NoAuth},
		{"locked parent, other digest", apAuth(apCreate("/locked/x", "", vocab.ModePersistent), apBob), vocab.NoAuth},
		{"/zookeeper/config is read-only", apCreate("/zookeeper/config/x", "", vocab.ModePersistent), vocab.NoAuth},
		{"under ephemeral", apCreate("/eph/x", "", vocab.ModePersistent), vocab.NoChildrenForEphemerals},
		{"under ephemeral, sequential", apCreate("/eph/x-", "", vocab.ModePersistentSequential), vocab.NoChildrenForEphemerals},
		{"ephemeral under ephemeral", apAs(apS1, apCreate("/eph/x", "", vocab.ModeEphemeral)), vocab.NoChildrenForEphemerals},
		// TTLs: EphemeralType.validateTTL before anything else (verified).
		{"ttl 0", apCreateTTL("/x", vocab.ModePersistentTTL, 0), vocab.BadArguments},
		{"ttl -1", apCreateTTL("/x", vocab.ModePersistentTTL, -1), vocab.BadArguments},
		{"ttl max+1", apCreateTTL("/x", vocab.ModePersistentTTL, MaxTTL+1), vocab.BadArguments},
		{"sequential ttl 0", apCreateTTL("/x", vocab.ModePersistentSequentialTTL, 0), vocab.BadArguments},
		{"ttl 0 + missing parent", apCreateTTL("/nope/x", vocab.ModePersistentTTL, 0), vocab.BadArguments},
		{"ttl on persistent", apCreateTTL("/x", vocab.ModePersistent, 100), vocab.BadArguments},
		{"ttl on container", apCreateTTL("/x", vocab.ModeContainer, 100), vocab.BadArguments},
		{"ttl on ephemeral", apAs(apS1, apCreateTTL("/x", vocab.ModeEphemeral, 100)), vocab.BadArguments},
		// coord: an ephemeral needs a session; the leader's own commands
		// (session 0) cannot own one.
		{"ephemeral without session", apCreate("/x", "", vocab.ModeEphemeral), vocab.BadArguments},
		{"ephemeral sequential without session", apCreate("/x-", "", vocab.ModeEphemeralSequential), vocab.BadArguments},
	})
}

// Apply has no data size limit: it is a server's setting, checked before
// the log, and apply depends only on the log (invariant 9). Two state
// machines given the same commands reach the same state whatever each
// server's limit is.
func TestApplyHasNoDataSizeLimit(t *testing.T) {
	big := []byte(strings.Repeat("x", oneMiB+1))
	a, b := New(), New()
	for _, f := range []*FSM{a, b} {
		if res, _ := f.Apply(1, &Command{Type: CmdCreate, Op: Op{Type: CmdCreate, Path: "/a", Data: big, ACL: vocab.OpenACLUnsafe}}); res.Err != nil {
			t.Fatalf("create with 1 MiB + 1: %v", res.Err)
		}
		if res, _ := f.Apply(1, &Command{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/a", Data: append(big, 'y'), Version: -1}}); res.Err != nil {
			t.Fatalf("setData with 1 MiB + 2: %v", res.Err)
		}
	}
	if a.View().Digest() != b.View().Digest() {
		t.Fatal("same commands, different states")
	}
}

func TestRefuseOversize(t *testing.T) {
	create := func(path string, n int) Op {
		return Op{Type: CmdCreate, Path: path, Data: make([]byte, n), ACL: vocab.OpenACLUnsafe}
	}
	for _, tc := range []struct {
		name    string
		cmd     Command
		refused bool
		code    vocab.Code
		path    string
		multi   []vocab.Code
	}{
		{name: "create at the limit", cmd: Command{Type: CmdCreate, Op: create("/a", 4)}},
		{name: "create over", cmd: Command{Type: CmdCreate, Op: create("/a", 5)}, refused: true, code: vocab.BadArguments, path: "/a"},
		{name: "setData over", cmd: Command{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/s", Data: make([]byte, 5)}},
			refused: true, code: vocab.BadArguments, path: "/s"},
		{name: "delete ignores data", cmd: Command{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: "/d", Data: make([]byte, 5)}}},
		{name: "multi with one op over", cmd: Command{Type: CmdMulti, Ops: []Op{
			create("/m1", 1), {Type: CmdCheck, Path: "/m1"}, {Type: CmdSetData, Path: "/m1", Data: make([]byte, 9)}, create("/m2", 1),
		}}, refused: true, code: vocab.BadArguments, path: "/m1", multi: []vocab.Code{vocab.OK, vocab.OK, vocab.BadArguments, vocab.RuntimeInconsistency}},
		{name: "multi within", cmd: Command{Type: CmdMulti, Ops: []Op{create("/m1", 4), {Type: CmdDelete, Path: "/m1"}}}},
	} {
		res, refused := RefuseOversize(&tc.cmd, 4)
		if refused != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.name, refused, tc.refused)
			continue
		}
		if !refused {
			continue
		}
		var e *vocab.Error
		if !errors.As(res.Err, &e) || e.Code != tc.code || e.Path != tc.path || res.Zxid != 0 {
			t.Errorf("%s: %v (zxid %v), want %v on %s", tc.name, res.Err, res.Zxid, tc.code, tc.path)
		}
		var got []vocab.Code
		for _, r := range res.Multi {
			got = append(got, r.Code)
		}
		if !slices.Equal(got, tc.multi) {
			t.Errorf("%s: multi results %v, want %v", tc.name, got, tc.multi)
		}
	}
}

func TestApplySequentialNames(t *testing.T) {
	// The ZooKeeper 3.8.0 session this replays: create /t, /t/a, /t/b,
	// delete /t/a, create /t/s- (seq) -> /t/s-0000000002, delete /t/b and it,
	// create /t/s- -> /t/s-0000000003, create /t/ (seq) -> /t/0000000004.
	// Deletes do not advance the counter; failed creates do not either.
	r := newApRig(t)
	r.ok(apCreate("/t", "", vocab.ModePersistent))
	r.ok(apCreate("/t/a", "", vocab.ModePersistent))
	r.ok(apCreate("/t/b", "", vocab.ModePersistent))
	r.ok(apDelete("/t/a", -1))
	if p := r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential)).Path; p != "/t/s-0000000002" {
		t.Errorf("after a delete: %s, want /t/s-0000000002", p)
	}
	r.ok(apDelete("/t/b", -1))
	r.ok(apDelete("/t/s-0000000002", -1))
	r.apply(apCreate("/t/a/x", "", vocab.ModePersistent)) // NoNode, counts nothing
	r.apply(apCreateACL("/t/x", apACL(vocab.PermAll, "world", "bob")))
	if p := r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential)).Path; p != "/t/s-0000000003" {
		t.Errorf("after two deletes: %s, want /t/s-0000000003", p)
	}
	if p := r.ok(apCreate("/t/", "", vocab.ModePersistentSequential)).Path; p != "/t/0000000004" {
		t.Errorf("trailing slash: %s, want /t/0000000004", p)
	}
	// Every kind of create counts, whatever its mode.
	s := r.session()
	for i, mode := range []vocab.CreateMode{vocab.ModeEphemeralSequential, vocab.ModeContainer, vocab.ModePersistentSequentialTTL, vocab.ModeEphemeral} {
		c := apAs(s, apCreate(fmt.Sprintf("/t/m%d-", i), "", mode))
		if mode.IsTTL() {
			c.Op.TTL = 10
		}
		r.ok(c)
	}
	if p := r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential)).Path; p != "/t/s-0000000009" {
		t.Errorf("after creates of every mode: %s, want /t/s-0000000009", p)
	}
	// The sequential name can collide with an existing node.
	r.ok(apCreate("/u", "", vocab.ModePersistent))
	r.ok(apCreate("/u/x0000000001", "", vocab.ModePersistent))
	res, _ := r.apply(apCreate("/u/x", "", vocab.ModePersistentSequential))
	apCode(t, "colliding sequential name", res.Err, vocab.NodeExists)
	if e, ok := res.Err.(*vocab.Error); !ok || e.Path != "/u/x0000000001" {
		t.Errorf("error %#v, want the path with its suffix", res.Err)
	}
	r.unchanged("colliding sequential name")
	// Closing the session deletes its ephemerals; the counter stays.
	r.ok(Command{Type: CmdCloseSession, Session: s})
	if p := r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential)).Path; p != "/t/s-0000000010" {
		t.Errorf("after closeSession: %s, want /t/s-0000000010", p)
	}
}

func TestApplySequenceSuffixFormat(t *testing.T) {
	// String.format("%010d", cversion): the sign counts towards the width.
	for cv, want := range map[int32]string{
		0: "0000000000", 7: "0000000007", 1234567890: "1234567890", math.MaxInt32: "2147483647",
		-1: "-000000001", -42: "-000000042", math.MinInt32: "-2147483648",
	} {
		if got := sequenceSuffix(cv); got != want || got != fmt.Sprintf("%010d", cv) {
			t.Errorf("sequenceSuffix(%d) = %q, want %q", cv, got, want)
		}
	}
}

func TestApplyDelete(t *testing.T) {
	rows := []struct {
		name   string
		cmd    Command
		parent string
	}{
		{"any version", apDelete("/a/b", -1), "/a"},
		{"right version", apDelete("/a/b", 0), "/a"},
		{"ephemeral by another session", apAs(apS2, apDelete("/eph", -1)), "/"},
		// DELETE is needed on the parent only (/nocreate is READ only).
		{"node whose own ACL forbids delete", apDelete("/nocreate", -1), "/"},
		{"locked parent, alice", apAuth(apDelete("/locked/kid", -1), apAlice), "/locked"},
		{"no DELETE on parent, super", apAuth(apDelete("/nodelete/kid", -1), apSuper), "/nodelete"},
		{"container", apDelete("/ctr", -1), "/"},
		{"ttl node", apDelete("/ttl", 0), "/"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newApFixture(t)
			path := row.cmd.Op.Path
			pBefore := r.stat(row.parent)
			res, trig := r.apply(row.cmd)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			z := r.zxid()
			apSameTriggers(t, "delete", trig, []Trigger{{Path: path, Type: vocab.EventNodeDeleted, Zxid: z}, {Path: row.parent, Type: vocab.EventNodeChildrenChanged, Zxid: z}})
			r.missing(path)
			p := r.stat(row.parent)
			want := pBefore
			want.NumChildren--
			want.Pzxid = z
			apSameStat(t, "parent", p, want)
			if r.f.View().NodeCount() != 4+10-1 {
				t.Errorf("NodeCount %d", r.f.View().NodeCount())
			}
			for _, s := range []int64{apS1, apS2} {
				if slices.Contains(r.f.View().GetEphemerals(s, "/"), path) {
					t.Errorf("%s still an ephemeral of %#x", path, s)
				}
			}
			if slices.Contains(r.f.View().ContainerCandidates(), path) || slices.Contains(r.f.View().ExpiredTTLs(math.MaxInt64), path) {
				t.Errorf("%s still tracked as a container or ttl", path)
			}
		})
	}
	runErrRows(t, []apErrRow{
		{"wrong version", apDelete("/a/b", 1), vocab.BadVersion},
		{"version -2", apDelete("/a/b", -2), vocab.BadVersion},
		{"not empty", apDelete("/a", -1), vocab.NotEmpty},
		{"not empty, right version", apDelete("/a", 0), vocab.NotEmpty},
		// checkAndIncVersion comes before the children check (verified).
		{"not empty, wrong version", apDelete("/a", 5), vocab.BadVersion},
		{"missing", apDelete("/nope", -1), vocab.NoNode},
		{"missing parent", apDelete("/nope/x", -1), vocab.NoNode},
		{"missing, wrong version", apDelete("/nope", 3), vocab.NoNode},
		{"trailing slash", apDelete("/a/b/", -1), vocab.NoNode},
		{"empty segment", apDelete("/a//b", -1), vocab.NoNode},
		// DELETE is checked on the parent, before the node is looked up (verified).
		{"no DELETE on parent", apDelete("/nodelete/kid", -1), vocab.NoAuth},
		{"no DELETE on parent, missing child", apDelete("/nodelete/missing", -1), vocab.NoAuth},
		{"no DELETE on parent, wrong version", apDelete("/nodelete/kid", 9), vocab.NoAuth},
		{"locked parent, bob", apAuth(apDelete("/locked/kid", -1), apBob), vocab.NoAuth},
		{"root", apDelete("/", -1), vocab.BadArguments},
		{"/zookeeper", apDelete("/zookeeper", -1), vocab.BadArguments},
		{"/zookeeper/quota", apDelete("/zookeeper/quota", -1), vocab.BadArguments},
		{"/zookeeper/config", apDelete("/zookeeper/config", -1), vocab.BadArguments},
		{"no slash", apDelete("abc", -1), vocab.BadArguments},
		{"empty path", apDelete("", -1), vocab.BadArguments},
		{"NUL", apDelete("/a/b\x00", -1), vocab.BadArguments},
	})
}

func TestApplySetData(t *testing.T) {
	type row struct {
		name string
		cmd  Command
		want func(before vocab.Stat) vocab.Stat
	}
	bump := func(n int32) func(vocab.Stat) vocab.Stat {
		return func(b vocab.Stat) vocab.Stat {
			b.Version++
			b.DataLength = n
			b.Mzxid, b.Mtime = apRowZ, apRowTime
			return b
		}
	}
	rows := []row{
		{"any version", apSet("/a", "new", -1), bump(3)},
		{"right version", apSet("/a", "new", 0), bump(3)},
		{"empty data", apSet("/a", "", 0), bump(0)},
		{"root", apSet("/", "rootdata", -1), bump(8)},
		{"/zookeeper", apSet("/zookeeper", "x", -1), bump(1)},
		{"ephemeral by another session", apAs(apS2, apSet("/eph", "xy", -1)), bump(2)},
		{"locked, alice", apAuth(apSet("/locked", "xy", 0), apAlice), bump(2)},
		{"/zookeeper/config, super", apAuth(apSet("/zookeeper/config", "xy", -1), apSuper), bump(2)},
		{"exactly 1 MiB", apSet("/a", strings.Repeat("y", 1<<20), -1), bump(1 << 20)},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newApFixture(t)
			path := row.cmd.Op.Path
			before := r.stat(path)
			res, trig := r.apply(row.cmd)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			want := row.want(before)
			apSameStat(t, "result", res.Stat, want)
			apSameStat(t, "exists", r.stat(path), want)
			apSameTriggers(t, "setData", trig, []Trigger{{Path: path, Type: vocab.EventNodeDataChanged, Zxid: apRowZ}})
			data, _, _ := r.f.View().GetData(path, []vocab.Id{apSuper})
			if !bytes.Equal(data, row.cmd.Op.Data) {
				t.Errorf("data %q", data)
			}
		})
	}
	t.Run("versions count up, mtime and mzxid follow", func(t *testing.T) {
		r := newApFixture(t)
		for v := int32(0); v < 3; v++ {
			res, _ := r.apply(apSet("/a/b", fmt.Sprint(v), v))
			if res.Err != nil || res.Stat.Version != v+1 || res.Stat.Mzxid != r.zxid() || res.Stat.Mtime != r.now ||
				res.Stat.Czxid != apZ(4) || res.Stat.Ctime != apTime(4) {
				t.Fatalf("setData #%d: %v %+v", v, res.Err, res.Stat)
			}
		}
		res, _ := r.apply(apSet("/a/b", "x", 2))
		apCode(t, "stale version", res.Err, vocab.BadVersion)
	})
	t.Run("does not touch the parent", func(t *testing.T) {
		r := newApFixture(t)
		before := r.stat("/a")
		r.ok(apSet("/a/b", "x", -1))
		apSameStat(t, "/a", r.stat("/a"), before)
	})
	runErrRows(t, []apErrRow{
		{"wrong version", apSet("/a", "x", 1), vocab.BadVersion},
		{"version -2", apSet("/a", "x", -2), vocab.BadVersion},
		{"missing", apSet("/nope", "x", -1), vocab.NoNode},
		{"missing, wrong version", apSet("/nope", "x", 4), vocab.NoNode},
		{"trailing slash", apSet("/a/", "x", -1), vocab.BadArguments},
		{"no slash", apSet("nope", "x", -1), vocab.BadArguments},
		{"empty path", apSet("", "x", -1), vocab.BadArguments},
		// /zookeeper/config is world:anyone READ (ZOOKEEPER-2014); WRITE is
		// checked before the version (verified).
		{"/zookeeper/config", apSet("/zookeeper/config", "x", -1), vocab.NoAuth},
		{"/zookeeper/config, wrong version", apSet("/zookeeper/config", "x", 7), vocab.NoAuth},
		{"locked, nobody", apSet("/locked", "x", -1), vocab.NoAuth},
		{"locked, nobody, wrong version", apSet("/locked", "x", 9), vocab.NoAuth},
		{"locked, bob", apAuth(apSet("/locked", "x", -1), apBob), vocab.NoAuth},
		{"locked, ip", apAuth(apSet("/locked", "x", -1), apLocal), vocab.NoAuth},
	})
}

func TestApplyNextVersion(t *testing.T) {
	// ZOOKEEPER-4743 (3.9.2+, not in 3.8.0): the version after -2 is 0, never
	// -1, which clients use for "any". coord: follows the fix.
	for v, want := range map[int32]int32{0: 1, 41: 42, math.MaxInt32: math.MinInt32, -3: -2, -2: 0} {
		if got := nextVersion(v); got != want {
			t.Errorf("nextVersion(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestApplySetACL(t *testing.T) {
	t.Run("aversion counts, nothing else moves, nothing fires", func(t *testing.T) {
		r := newApFixture(t)
		before := r.stat("/a")
		res, trig := r.apply(apSetACL("/a", -1, vocab.ReadACLUnsafe...))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		want := before
		want.Aversion = 1
		apSameStat(t, "result", res.Stat, want)
		apSameStat(t, "exists", r.stat("/a"), want)
		if len(trig) != 0 {
			t.Errorf("setACL fired %v (ZooKeeper fires no watch for it)", trig)
		}
		if acl, _, _ := r.f.View().GetACL("/a", nil); !slices.Equal(acl, vocab.ReadACLUnsafe) {
			t.Errorf("acl %v", acl)
		}
		// Now read-only: ADMIN is gone too.
		res, _ = r.apply(apSetACL("/a", 1, vocab.OpenACLUnsafe...))
		apCode(t, "setACL after dropping ADMIN", res.Err, vocab.NoAuth)
		res = r.ok(apAuth(apSetACL("/a", 1, vocab.OpenACLUnsafe...), apSuper))
		if res.Stat.Aversion != 2 {
			t.Errorf("aversion %d, want 2", res.Stat.Aversion)
		}
	})
	t.Run("auth expands to the caller", func(t *testing.T) {
		r := newApFixture(t)
		r.ok(apAuth(apSetACL("/a", 0, vocab.CreatorAllACL...), apBob, apAlice))
		acl, _, _ := r.f.View().GetACL("/a", []vocab.Id{apBob})
		if !slices.Equal(acl, []vocab.ACL{{Perms: vocab.PermAll, ID: apBob}, {Perms: vocab.PermAll, ID: apAlice}}) {
			t.Errorf("acl %v", acl)
		}
	})
	t.Run("locked, alice", func(t *testing.T) {
		r := newApFixture(t)
		if res := r.ok(apAuth(apSetACL("/locked", 0, vocab.OpenACLUnsafe...), apAlice)); res.Stat.Aversion != 1 {
			t.Errorf("stat %+v", res.Stat)
		}
		r.ok(apSet("/locked", "now open", -1))
	})
	badACL := apACL(vocab.PermAll, "world", "bob")
	runErrRows(t, []apErrRow{
		{"wrong version", apSetACL("/a", 1, vocab.OpenACLUnsafe...), vocab.BadVersion},
		{"missing", apSetACL("/nope", -1, vocab.OpenACLUnsafe...), vocab.NoNode},
		{"empty ACL", apSetACL("/a", -1), vocab.InvalidACL},
		{"invalid ACL", apSetACL("/a", -1, badACL), vocab.InvalidACL},
		// fixupACL comes before the node lookup (verified), the path before both.
		{"missing + invalid ACL", apSetACL("/nope", -1, badACL), vocab.InvalidACL},
		{"bad path + invalid ACL", apSetACL("/a/", -1, badACL), vocab.BadArguments},
		{"bad path", apSetACL("/a/", -1, vocab.OpenACLUnsafe...), vocab.BadArguments},
		{"auth without credentials", apSetACL("/a", -1, vocab.CreatorAllACL...), vocab.InvalidACL},
		{"locked, nobody", apSetACL("/locked", -1, vocab.OpenACLUnsafe...), vocab.NoAuth},
		{"locked, nobody, wrong version", apSetACL("/locked", 9, vocab.OpenACLUnsafe...), vocab.NoAuth},
		{"/zookeeper/config", apSetACL("/zookeeper/config", -1, vocab.OpenACLUnsafe...), vocab.NoAuth},
	})
}

func TestApplyCheck(t *testing.T) {
	// coord: check is also a command of its own. ZooKeeper 3.8.0 accepts the
	// opcode outside multi but cannot answer it (NullPointerException in
	// FinalRequestProcessor, and the txn it logs breaks replay), so these
	// rows follow the check op of multi.
	r := newApFixture(t)
	for _, c := range []Command{apCheck("/a", 0), apCheck("/a", -1), apAuth(apCheck("/locked", 0), apAlice), apCheck("/zookeeper/config", 0)} {
		res, trig := r.apply(c)
		if res.Err != nil || len(trig) != 0 || res.Stat != (vocab.Stat{}) {
			t.Errorf("check %s: %+v %v", c.Op.Path, res, trig)
		}
	}
	r.ok(apSet("/a", "x", -1))
	r.ok(apCheck("/a", 1))
	r.ok(apCheck("/a", -1))
	runErrRows(t, []apErrRow{
		{"wrong version", apCheck("/a", 1), vocab.BadVersion},
		{"missing", apCheck("/nope", 0), vocab.NoNode},
		{"bad path", apCheck("/a/", 0), vocab.BadArguments},
		{"no READ", apCheck("/locked", 0), vocab.NoAuth},
		{"no READ, wrong version", apCheck("/locked", 5), vocab.NoAuth},
	})
}

func TestApplyMulti(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		// Replays a ZooKeeper 3.8.0 multi: sequential names use the cversion
		// the earlier ops left (s-0000000000, s-0000000001, then /m/a is
		// created and deleted, then s-0000000003); every op has the multi's
		// zxid; results come back in op order.
		r := newApRig(t)
		r.ok(apCreate("/m", "", vocab.ModePersistent))
		mBefore := r.stat("/m")
		res, trig := r.apply(apMulti(
			apCreate("/m/s-", "1", vocab.ModePersistentSequential),
			apCreate("/m/s-", "2", vocab.ModePersistentSequential),
			apCreate("/m/a", "a", vocab.ModePersistent),
			apSet("/m/a", "aa", 0),
			apCheck("/m/a", 1),
			apDelete("/m/a", 1),
			apCreate("/m/s-", "", vocab.ModePersistentSequential),
		))
		z := r.zxid()
		if res.Err != nil {
			t.Fatalf("multi: %v", res.Err)
		}
		wantPaths := []string{"/m/s-0000000000", "/m/s-0000000001", "/m/a", "", "", "", "/m/s-0000000003"}
		wantTypes := []CmdType{CmdCreate, CmdCreate, CmdCreate, CmdSetData, CmdCheck, CmdDelete, CmdCreate}
		if len(res.Multi) != len(wantPaths) {
			t.Fatalf("%d results, want %d", len(res.Multi), len(wantPaths))
		}
		for i, or := range res.Multi {
			if or.Code != vocab.OK || or.Path != wantPaths[i] || or.Type != wantTypes[i] {
				t.Errorf("result %d = %+v, want %v %q OK", i, or, wantTypes[i], wantPaths[i])
			}
		}
		apSameStat(t, "create result", res.Multi[0].Stat, vocab.Stat{Czxid: z, Mzxid: z, Pzxid: z, Ctime: r.now, Mtime: r.now, DataLength: 1})
		apSameStat(t, "setData result", res.Multi[3].Stat, vocab.Stat{Czxid: z, Mzxid: z, Pzxid: z, Ctime: r.now, Mtime: r.now, Version: 1, DataLength: 2})
		apSameTriggers(t, "multi", trig, []Trigger{
			{Path: "/m/s-0000000000", Type: vocab.EventNodeCreated, Zxid: z}, {Path: "/m", Type: vocab.EventNodeChildrenChanged, Zxid: z},
			{Path: "/m/s-0000000001", Type: vocab.EventNodeCreated, Zxid: z}, {Path: "/m", Type: vocab.EventNodeChildrenChanged, Zxid: z},
			{Path: "/m/a", Type: vocab.EventNodeCreated, Zxid: z}, {Path: "/m", Type: vocab.EventNodeChildrenChanged, Zxid: z},
			{Path: "/m/a", Type: vocab.EventNodeDataChanged, Zxid: z},
			{Path: "/m/a", Type: vocab.EventNodeDeleted, Zxid: z}, {Path: "/m", Type: vocab.EventNodeChildrenChanged, Zxid: z},
			{Path: "/m/s-0000000003", Type: vocab.EventNodeCreated, Zxid: z}, {Path: "/m", Type: vocab.EventNodeChildrenChanged, Zxid: z},
		})
		want := mBefore
		want.NumChildren, want.Pzxid = 3, z
		apSameStat(t, "/m", r.stat("/m"), want)
		if kids, _, _ := r.f.View().GetChildren("/m", nil); !slices.Equal(kids, []string{"s-0000000000", "s-0000000001", "s-0000000003"}) {
			t.Errorf("children %v", kids)
		}
		r.missing("/m/a")
	})
	t.Run("visible to the next View", func(t *testing.T) {
		// A reader must see the multi's state as soon as Apply returns,
		// also when it took a View before the multi.
		r := newApRig(t)
		r.f.View()
		r.ok(apMulti(apCreate("/x", "", vocab.ModePersistent)))
		v := r.f.View()
		if _, err := v.Exists("/x"); err != nil {
			t.Errorf("after a multi created /x, View().Exists: %v", err)
		}
		if v.LastZxid() != r.f.LastZxid() {
			t.Errorf("View().LastZxid %v, FSM LastZxid %v", v.LastZxid(), r.f.LastZxid())
		}
		r.f.View()
		r.apply(apMulti(apCreate("/x", "", vocab.ModePersistent))) // fails: NodeExists
		if v := r.f.View(); v.LastZxid() != r.f.LastZxid() {
			t.Errorf("after a failed multi: View().LastZxid %v, FSM LastZxid %v", v.LastZxid(), r.f.LastZxid())
		}
	})
	t.Run("delete then create the same name", func(t *testing.T) {
		r := newApFixture(t)
		res, _ := r.apply(apMulti(apDelete("/a/b", 0), apCreate("/a/b", "again", vocab.ModePersistent)))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		apSameStat(t, "/a/b", r.stat("/a/b"), vocab.Stat{Czxid: apRowZ, Mzxid: apRowZ, Pzxid: apRowZ, Ctime: apRowTime, Mtime: apRowTime, DataLength: 5})
	})
	t.Run("create then setData twice", func(t *testing.T) {
		r := newApFixture(t)
		res, trig := r.apply(apMulti(apCreate("/d", "1", vocab.ModePersistent), apSet("/d", "22", 0), apSet("/d", "333", 1)))
		if res.Err != nil || res.Multi[2].Stat.Version != 2 || res.Multi[1].Stat.Version != 1 || res.Multi[2].Stat.DataLength != 3 {
			t.Fatalf("%v %+v", res.Err, res.Multi)
		}
		if len(trig) != 4 || trig[2].Path != "/d" || trig[2].Type != vocab.EventNodeDataChanged || trig[2].Zxid != apRowZ || trig[3].Path != "/d" || trig[3].Zxid != apRowZ {
			t.Errorf("triggers %v", trig)
		}
	})
	t.Run("containers, ttl and ephemerals", func(t *testing.T) {
		r := newApFixture(t)
		ttl := apCreateTTL("/m-ttl", vocab.ModePersistentTTL, 1000)
		res, _ := r.apply(apAs(apS2, apMulti(apCreate("/m-ctr", "", vocab.ModeContainer), ttl, apCreate("/m-eph", "", vocab.ModeEphemeral))))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for i, owner := range []int64{0, 0, apS2} { // clients see 0 for containers and TTL nodes
			if res.Multi[i].Stat.EphemeralOwner != owner {
				t.Errorf("op %d owner %#x, want %#x", i, res.Multi[i].Stat.EphemeralOwner, owner)
			}
		}
		if e := r.f.View().GetEphemerals(apS2, "/"); !slices.Equal(e, []string{"/m-eph"}) {
			t.Errorf("ephemerals %v", e)
		}
		if e := r.f.View().ExpiredTTLs(r.now + 1001); !slices.Equal(e, []string{"/m-ttl", "/ttl"}) {
			t.Errorf("expired ttls %v", e)
		}
	})
	t.Run("empty", func(t *testing.T) {
		// ZooKeeper: an empty multi is a txn with no results (verified).
		r := newApFixture(t)
		res, trig := r.apply(apMulti())
		if res.Err != nil || len(res.Multi) != 0 || len(trig) != 0 {
			t.Errorf("empty multi = %+v, %v", res, trig)
		}
		r.unchanged("empty multi")
	})

	// Failures: the ops before the failing one report OK, the failing one
	// its code, the later ones RuntimeInconsistency (verified on 3.8.0), and
	// the state is as before (but for the zxid).
	failing := []struct {
		name  string
		cmd   Command
		codes []vocab.Code
	}{
		{"node exists in the middle", apMulti(apCreate("/a/x", "", vocab.ModePersistent), apSet("/a", "x", -1), apCreate("/a/b", "", vocab.ModePersistent), apDelete("/a/x", -1), apCheck("/a", 1)),
			[]vocab.Code{vocab.OK, vocab.OK, vocab.NodeExists, vocab.RuntimeInconsistency, vocab.RuntimeInconsistency}},
		{"first op", apMulti(apCheck("/a", 5), apCreate("/a/x", "", vocab.ModePersistent)), []vocab.Code{vocab.BadVersion, vocab.RuntimeInconsistency}},
		{"last op", apMulti(apCreate("/a/x", "", vocab.ModePersistent), apSet("/a/x", "", 3)), []vocab.Code{vocab.OK, vocab.BadVersion}},
		{"bad path", apMulti(apCreate("/a/x", "", vocab.ModePersistent), apCreate("bad", "", vocab.ModePersistent)), []vocab.Code{vocab.OK, vocab.BadArguments}},
		{"child of an ephemeral made in the multi", apAs(apS1, apMulti(apCreate("/a/e", "", vocab.ModeEphemeral), apCreate("/a/e/kid", "", vocab.ModePersistent))),
			[]vocab.Code{vocab.OK, vocab.NoChildrenForEphemerals}},
		{"delete a node made in the multi, then fail", apMulti(apCreate("/a/x", "", vocab.ModePersistent), apDelete("/a/x", -1), apDelete("/a/b", 3)),
			[]vocab.Code{vocab.OK, vocab.OK, vocab.BadVersion}},
		{"deletes, then fail", apMulti(apDelete("/a/b", -1), apDelete("/a", -1), apDelete("/ctr", -1), apCheck("/nope", -1)),
			[]vocab.Code{vocab.OK, vocab.OK, vocab.OK, vocab.NoNode}},
		{"no READ for check", apMulti(apSet("/a", "x", -1), apCheck("/locked", 0)), []vocab.Code{vocab.OK, vocab.NoAuth}},
		{"no CREATE", apMulti(apCreate("/nocreate/x", "", vocab.ModePersistent)), []vocab.Code{vocab.NoAuth}},
		{"invalid ACL", apMulti(apCreateACL("/x", apACL(vocab.PermAll, "world", "bob"))), []vocab.Code{vocab.InvalidACL}},
		{"ephemerals then fail", apAs(apS2, apMulti(apCreate("/e2", "", vocab.ModeEphemeral), apCreate("/e2", "", vocab.ModeEphemeral))),
			[]vocab.Code{vocab.OK, vocab.NodeExists}},
		{"delete ephemeral then fail", apMulti(apDelete("/eph", -1), apDelete("/eph", -1)), []vocab.Code{vocab.OK, vocab.NoNode}},
		// coord: multi takes create, delete, setData and check, as
		// ZooKeeper's multi does; any other op is BadArguments (ZooKeeper's
		// client cannot even encode one).
		{"setACL op", apMulti(apCreate("/a/x", "", vocab.ModePersistent), apSetACL("/a", -1, vocab.OpenACLUnsafe...)), []vocab.Code{vocab.OK, vocab.BadArguments}},
		{"deleteContainer op", apMulti(apDelC("/ctr"), apCreate("/a/x", "", vocab.ModePersistent)), []vocab.Code{vocab.BadArguments, vocab.RuntimeInconsistency}},
		{"multi op", apMulti(apCreate("/a/x", "", vocab.ModePersistent), Command{Op: Op{Type: CmdMulti, Path: "/"}}), []vocab.Code{vocab.OK, vocab.BadArguments}},
		{"session op", apMulti(Command{Op: Op{Type: CmdCreateSession}}), []vocab.Code{vocab.BadArguments}},
	}
	for _, row := range failing {
		t.Run("fails/"+row.name, func(t *testing.T) {
			r := newApFixture(t)
			res, trig := r.apply(row.cmd)
			failAt := slices.IndexFunc(row.codes, func(c vocab.Code) bool { return c != vocab.OK })
			apCode(t, "multi", res.Err, row.codes[failAt])
			if len(res.Multi) != len(row.codes) {
				t.Fatalf("%d results, want %d", len(res.Multi), len(row.codes))
			}
			for i, or := range res.Multi {
				if or.Code != row.codes[i] || or.Type != row.cmd.Ops[i].Type {
					t.Errorf("result %d = %v %v, want %v %v", i, or.Type, or.Code, row.cmd.Ops[i].Type, row.codes[i])
				}
			}
			if len(trig) != 0 {
				t.Errorf("a failed multi fired %v", trig)
			}
			r.unchanged(row.name)
			for _, p := range []string{"/a/x", "/a/e", "/e2"} {
				r.missing(p)
			}
			for _, p := range []string{"/a", "/a/b", "/ctr", "/eph"} {
				r.stat(p)
			}
			if e := r.f.View().GetEphemerals(apS1, "/"); !slices.Equal(e, []string{"/eph"}) {
				t.Errorf("S1 ephemerals %v", e)
			}
			if e := r.f.View().GetEphemerals(apS2, "/"); len(e) != 0 {
				t.Errorf("S2 ephemerals %v", e)
			}
			// The rolled-back creates did not use up sequence numbers.
			if p := r.ok(apCreate("/a/s-", "", vocab.ModePersistentSequential)).Path; p != "/a/s-0000000001" {
				t.Errorf("next sequential name %s", p)
			}
		})
	}
}

func TestApplyDeleteContainer(t *testing.T) {
	// The leader's clean-up (session 0, no ACL check, as ZooKeeper's
	// deleteContainer). ttl nodes expire when now - mtime > ttl, strictly
	// (ContainerManager.getCandidates).
	ttlTime := apTime(12) // /ttl's ctime and mtime
	ok := []struct {
		name  string
		setup []Command
		cmd   Command
	}{
		{"empty container", nil, apDelC("/ctr")},
		{"container emptied", []Command{apCreate("/ctr/k", "", vocab.ModePersistent), apDelete("/ctr/k", -1)}, apDelC("/ctr")},
		{"expired ttl", nil, func() Command { c := apDelC("/ttl"); c.Time = ttlTime + 1001; return c }()},
		{"ttl long expired", nil, func() Command { c := apDelC("/ttl"); c.Time = ttlTime + 1_000_000; return c }()},
	}
	for _, row := range ok {
		t.Run(row.name, func(t *testing.T) {
			r := newApFixture(t)
			for _, c := range row.setup {
				r.ok(c)
			}
			res, trig := r.apply(row.cmd)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			z := r.zxid()
			p := row.cmd.Op.Path
			apSameTriggers(t, "deleteContainer", trig, []Trigger{{Path: p, Type: vocab.EventNodeDeleted, Zxid: z}, {Path: "/", Type: vocab.EventNodeChildrenChanged, Zxid: z}})
			r.missing(p)
			if r.stat("/").Pzxid != z {
				t.Errorf("root pzxid %#x, want %#x", r.stat("/").Pzxid, z)
			}
			if slices.Contains(r.f.View().ContainerCandidates(), p) || slices.Contains(r.f.View().ExpiredTTLs(math.MaxInt64), p) {
				t.Errorf("%s still tracked", p)
			}
		})
	}
	at := func(c Command, time int64) Command { c.Time = time; return c }
	runErrRows(t, []apErrRow{
		{"missing", apDelC("/nope"), vocab.NoNode},
		{"missing parent", apDelC("/nope/x"), vocab.NoNode},
		{"root", apDelC("/"), vocab.BadArguments},
		{"/zookeeper", apDelC("/zookeeper"), vocab.BadArguments},
		{"/zookeeper/config", apDelC("/zookeeper/config"), vocab.BadArguments},
		{"no slash", apDelC("ctr"), vocab.BadArguments},
		{"NUL", apDelC("/ctr\x00"), vocab.BadArguments},
		// ZooKeeper refuses a session's ephemeral (BadVersion)...
		{"ephemeral", apDelC("/eph"), vocab.BadVersion},
		// coord: ...but its PrepRequestProcessor would delete a childless
		// persistent node or an unexpired ttl node (it leaves those checks
		// to ContainerManager). coord re-checks at apply and refuses them.
		{"persistent", apDelC("/a/b"), vocab.BadVersion},
		{"ttl not yet expired", at(apDelC("/ttl"), ttlTime+999), vocab.BadVersion},
		{"ttl exactly at its ttl", at(apDelC("/ttl"), ttlTime+1000), vocab.BadVersion},
		{"ttl, time before its mtime", at(apDelC("/ttl"), ttlTime-5000), vocab.BadVersion},
		// Children are checked before the kind of node.
		{"persistent with children", apDelC("/a"), vocab.NotEmpty},
	})
	t.Run("container with a child", func(t *testing.T) {
		r := newApFixture(t)
		r.ok(apCreate("/ctr/k", "", vocab.ModePersistent))
		res, _ := r.apply(apDelC("/ctr"))
		apCode(t, "deleteContainer", res.Err, vocab.NotEmpty)
		r.unchanged("container with a child")
	})
	t.Run("expired ttl with a child", func(t *testing.T) {
		r := newApFixture(t)
		r.ok(apCreate("/ttl/k", "", vocab.ModePersistent))
		res, _ := r.apply(at(apDelC("/ttl"), ttlTime+5000))
		apCode(t, "deleteContainer", res.Err, vocab.NotEmpty)
		r.unchanged("ttl with a child")
	})
	t.Run("setData renews a ttl", func(t *testing.T) {
		r := newApFixture(t)
		r.ok(at(apSet("/ttl", "x", -1), ttlTime+900))
		res, _ := r.apply(at(apDelC("/ttl"), ttlTime+1500))
		apCode(t, "deleteContainer", res.Err, vocab.BadVersion)
		r.unchanged("renewed ttl")
		r.ok(at(apDelC("/ttl"), ttlTime+1901))
	})
}

// TestApplyCversionAsZooKeeperReportsIt replays ZooKeeper 3.8.0 sessions and
// expects the cversion its clients saw. ZooKeeper stores the number of child
// creates (that is what the sequential suffix uses) but reports
// 2*creates-numChildren, the number of child creates and deletes
// (DataNode.copyStat, "v3 semantics"): a fresh root shows -1, /zookeeper -2,
// and every delete raises the parent's reported cversion by one.
func TestApplyCversionAsZooKeeperReportsIt(t *testing.T) {
	r := newApRig(t)
	cv := func(path string, want int32) {
		t.Helper()
		if got := r.stat(path).Cversion; got != want {
			t.Errorf("%s cversion %d, ZooKeeper reports %d", path, got, want)
		}
	}
	cv("/", -1)
	cv("/zookeeper", -2)
	cv("/zookeeper/quota", 0)
	cv("/zookeeper/config", 0)
	r.ok(apCreate("/t", "", vocab.ModePersistent))
	cv("/", 0)
	cv("/t", 0)
	r.ok(apCreate("/t/a", "", vocab.ModePersistent))
	cv("/t", 1)
	r.ok(apCreate("/t/b", "", vocab.ModePersistent))
	cv("/t", 2)
	r.ok(apDelete("/t/a", -1))
	cv("/t", 3)
	r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential)) // /t/s-0000000002
	cv("/t", 4)
	r.ok(apDelete("/t/b", -1))
	r.ok(apDelete("/t/s-0000000002", -1))
	cv("/t", 6)
	r.ok(apCreate("/t/s-", "", vocab.ModePersistentSequential))
	r.ok(apCreate("/t/", "", vocab.ModePersistentSequential))
	cv("/t", 8)
	if _, st, _ := r.f.View().GetChildren("/t", nil); st.Cversion != 8 {
		t.Errorf("getChildren2 stat cversion %d, want 8", st.Cversion)
	}

	// closeSession: 3 ephemerals created (3), then deleted with it (6).
	s := r.session()
	r.ok(apCreate("/cs", "", vocab.ModePersistent))
	r.ok(apAs(s, apCreate("/cs/b", "", vocab.ModeEphemeral)))
	r.ok(apAs(s, apCreate("/cs/a", "", vocab.ModeEphemeral)))
	r.ok(apAs(s, apCreate("/cs/q-", "", vocab.ModeEphemeralSequential)))
	cv("/cs", 3)
	r.ok(Command{Type: CmdCloseSession, Session: s})
	cv("/cs", 6)

	// The Stat returned by create/setData/setACL reports it the same way.
	r.ok(apCreate("/r", "", vocab.ModePersistent))
	r.ok(apCreate("/r/a", "", vocab.ModePersistent))
	r.ok(apDelete("/r/a", -1))
	if st := r.ok(apSet("/r", "x", -1)).Stat; st.Cversion != 2 {
		t.Errorf("setData stat cversion %d, want 2", st.Cversion)
	}
	if st := r.ok(apSetACL("/r", -1, vocab.OpenACLUnsafe...)).Stat; st.Cversion != 2 {
		t.Errorf("setACL stat cversion %d, want 2", st.Cversion)
	}

	// A multi: 4 creates and 1 delete, 3 children left -> 5.
	r.ok(apCreate("/m", "", vocab.ModePersistent))
	r.ok(apMulti(
		apCreate("/m/s-", "1", vocab.ModePersistentSequential), apCreate("/m/s-", "2", vocab.ModePersistentSequential),
		apCreate("/m/a", "a", vocab.ModePersistent), apSet("/m/a", "aa", 0), apCheck("/m/a", 1), apDelete("/m/a", 1),
		apCreate("/m/s-", "", vocab.ModePersistentSequential)))
	cv("/m", 5)
}
