package fsm

import (
	"bytes"
	"coord/vocab"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

// Readers work on views while Apply runs. Run with -race: besides the
// checks below, the race detector checks that a view shares nothing the
// writer changes in place.

// TestViewFreshAfterEveryCommand: a view taken after Apply returns shows that
// command, whatever its kind and outcome, even if a view was cached before.
func TestViewFreshAfterEveryCommand(t *testing.T) {
	f := New()
	sid := mustApply(t, f, 1, Command{Type: CmdCreateSession, Timeout: 1000}).SessionID
	cmds := []Command{
		mkCreate("/a", nil, vocab.ModePersistent),
		{Type: CmdMulti, Ops: []Op{{Type: CmdCreate, Path: "/m", ACL: vocab.OpenACLUnsafe}}},
		{Type: CmdMulti, Ops: []Op{{Type: CmdCreate, Path: "/n", ACL: vocab.OpenACLUnsafe}, {Type: CmdDelete, Path: "/missing", Version: -1}}},
		{Type: CmdMulti},
		{Type: CmdSetData, Op: Op{Type: CmdSetData, Path: "/a", Data: []byte("x"), Version: -1}},
		{Type: CmdDelete, Op: Op{Type: CmdDelete, Path: "/missing", Version: -1}},
		as(sid, mkCreate("/e", nil, vocab.ModeEphemeral)),
		{Type: CmdCloseSession, Session: sid},
		{Type: 0},
		{Type: CmdMulti, Ops: []Op{{Type: CmdCreate, Path: "/o", ACL: vocab.OpenACLUnsafe}}},
	}
	for _, c := range cmds {
		before := f.View()
		r, _ := f.Apply(1, &c)
		v := f.View()
		if v.LastZxid() != r.Zxid {
			t.Errorf("after %s: View().LastZxid() = %v, want %v (stale view)", describeCmd(&c), v.LastZxid(), r.Zxid)
		}
		if r.Err == nil && v == before {
			t.Errorf("after %s: View() returned the view from before the command", describeCmd(&c))
		}
	}
	v := f.View()
	for p, want := range map[string]bool{"/a": true, "/m": true, "/n": false, "/e": false, "/o": true} {
		if _, err := v.Exists(p); (err == nil) != want {
			t.Errorf("final view: exists %s = %v, want %v", p, err == nil, want)
		}
	}
	if v2 := f.View(); v2 != v {
		t.Error("View() without a command in between made a new view")
	}
}

// ccObservation is what a reader saw in one view.
type ccObservation struct {
	zxid     int64
	children int32
}

// TestConcurrentReadersSeeWholeCommands: a writer applies multis that create
// /x/N and /y/N together, multis that fail half way, and multis that set
// both /x and /y; readers check every view shows whole commands (the two
// parents always agree), is never older than what the writer had applied
// when it was taken, and never changes later. One reader also streams
// snapshots of its views and restores them while the writer goes on.
func TestConcurrentReadersSeeWholeCommands(t *testing.T) {
	const (
		writes   = 1200
		readers  = 4
		minReads = 50
		maxReads = 20000
	)
	f := New()
	mustApply(t, f, 1, mkCreate("/x", nil, vocab.ModePersistent))
	setup := mustApply(t, f, 1, mkCreate("/y", nil, vocab.ModePersistent))

	// The writer's log: zxid and /x's child count after each command.
	type entry struct {
		zxid     int64
		children int32
	}
	log := []entry{{int64(setup.Zxid), 0}}
	var applied atomic.Int64 // zxid of the last command Apply returned
	applied.Store(int64(setup.Zxid))
	var done atomic.Bool

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		var n int32
		for i := 0; i < writes; i++ {
			term := uint64(1 + i/400) // new epochs along the way
			var c Command
			switch i % 6 {
			case 3: // fails on its second op: /y/(n-1) exists (or /nope does not)
				dup := fmt.Sprintf("/y/%d", n-1)
				if n == 0 {
					dup = "/nope/x"
				}
				c = Command{Type: CmdMulti, Ops: []Op{
					{Type: CmdCreate, Path: fmt.Sprintf("/x/f%d", i), ACL: vocab.OpenACLUnsafe},
					{Type: CmdCreate, Path: dup, ACL: vocab.OpenACLUnsafe},
				}}
			case 5:
				c = Command{Type: CmdMulti, Ops: []Op{
					{Type: CmdSetData, Path: "/x", Data: []byte(fmt.Sprint(i)), Version: -1},
					{Type: CmdSetData, Path: "/y", Data: []byte(fmt.Sprint(i)), Version: -1},
				}}
			default:
				c = Command{Type: CmdMulti, Ops: []Op{
					{Type: CmdCreate, Path: fmt.Sprintf("/x/%d", n), ACL: vocab.OpenACLUnsafe, Data: []byte("x")},
					{Type: CmdCreate, Path: fmt.Sprintf("/y/%d", n), ACL: vocab.OpenACLUnsafe, Data: []byte("y")},
				}}
			}
			r, _ := f.Apply(term, &c)
			if r.Err == nil && c.Ops[0].Type == CmdCreate {
				n++
			}
			if (i%6 == 3) != (r.Err != nil) {
				t.Errorf("write %d (%s): %v", i, describeCmd(&c), r.Err)
			}
			log = append(log, entry{int64(r.Zxid), n})
			applied.Store(int64(r.Zxid))
		}
	}()

	seen := make([][]ccObservation, readers)
	for k := 0; k < readers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			type kept struct {
				v      *View
				digest [32]byte
				dump   string
			}
			var keep []kept
			var last int64
			for i := 0; i < maxReads && (i < minReads || !done.Load()); i++ {
				floor := applied.Load()
				v := f.View()
				z := int64(v.LastZxid())
				if z < floor {
					t.Errorf("reader %d: view at %#x, but %#x was applied before it was taken", k, z, floor)
					return
				}
				if z < last {
					t.Errorf("reader %d: view at %#x after one at %#x", k, z, last)
					return
				}
				last = z
				sx, err1 := v.Exists("/x")
				sy, err2 := v.Exists("/y")
				if err1 != nil || err2 != nil || sx.NumChildren != sy.NumChildren || sx.Version != sy.Version || sx.Cversion != sy.Cversion {
					t.Errorf("reader %d: half a multi in view %#x: /x %+v, /y %+v", k, z, sx, sy)
					return
				}
				if i%16 == 0 {
					kx, _, _ := v.GetChildren("/x", nil)
					ky, _, _ := v.GetChildren("/y", nil)
					if len(kx) != len(ky) || len(kx) != int(sx.NumChildren) {
						t.Errorf("reader %d: view %#x lists %d and %d children, Stat says %d", k, z, len(kx), len(ky), sx.NumChildren)
						return
					}
					dx, _, _ := v.GetData("/x", nil)
					dy, _, _ := v.GetData("/y", nil)
					if !bytes.Equal(dx, dy) {
						t.Errorf("reader %d: view %#x: /x holds %q, /y %q", k, z, dx, dy)
						return
					}
				}
				seen[k] = append(seen[k], ccObservation{z, sx.NumChildren})
				if i%97 == 0 && len(keep) < 8 {
					keep = append(keep, kept{v, v.Digest(), dumpView(v)})
				}
				if k == 0 && i%150 == 0 {
					// Snapshot while the writer goes on.
					var buf bytes.Buffer
					if _, err := v.WriteTo(&buf); err != nil {
						t.Errorf("WriteTo: %v", err)
						return
					}
					g := New()
					if err := g.Restore(&buf); err != nil || g.View().Digest() != v.Digest() {
						t.Errorf("reader %d: snapshot of view %#x taken during writes: %v / digest differs", k, z, err)
						return
					}
				}
				if i%64 == 0 {
					for _, kv := range keep {
						if kv.v.Digest() != kv.digest {
							t.Errorf("reader %d: the view at %v changed while writes went on", k, kv.v.LastZxid())
							return
						}
					}
				}
			}
			for _, kv := range keep {
				if kv.v.Digest() != kv.digest || dumpView(kv.v) != kv.dump {
					t.Errorf("reader %d: the view at %v changed after writes", k, kv.v.LastZxid())
				}
			}
		}(k)
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Each view showed exactly the state after its last command.
	total := 0
	for k, obs := range seen {
		total += len(obs)
		for _, o := range obs {
			i := sort.Search(len(log), func(i int) bool { return log[i].zxid >= o.zxid })
			if i == len(log) || log[i].zxid != o.zxid {
				t.Fatalf("reader %d saw zxid %#x, which no command had", k, o.zxid)
			}
			if log[i].children != o.children {
				t.Fatalf("reader %d: view at %#x has %d children under /x, the writer had %d then", k, o.zxid, o.children, log[i].children)
			}
		}
	}
	final := f.View()
	if final.LastZxid() != f.LastZxid() || int64(final.LastZxid()) != log[len(log)-1].zxid {
		t.Fatalf("final view at %v, FSM at %v, writer's last %#x", final.LastZxid(), f.LastZxid(), log[len(log)-1].zxid)
	}
	if sx, _ := final.Exists("/x"); sx.NumChildren != log[len(log)-1].children {
		t.Fatalf("final /x has %d children, want %d", sx.NumChildren, log[len(log)-1].children)
	}
	t.Logf("%d views checked", total)
}

// TestViewsSurviveLaterWrites: views taken one after another each keep their
// own state while the FSM deletes, re-creates and restores over them.
func TestViewsSurviveLaterWrites(t *testing.T) {
	f := New()
	type kept struct {
		v    *View
		dump string
		d    [32]byte
	}
	var views []kept
	take := func() {
		v := f.View()
		views = append(views, kept{v, dumpView(v), v.Digest()})
	}
	for i := 0; i < 40; i++ {
		mustApply(t, f, 1, mkCreate(fmt.Sprintf("/n%02d", i), []byte{byte(i)}, vocab.ModePersistent))
	}
	take()
	for i := 0; i < 40; i += 2 {
		mustApply(t, f, 1, mkDelete(fmt.Sprintf("/n%02d", i)))
	}
	take()
	mustApply(t, f, 2, Command{Type: CmdMulti, Ops: []Op{
		{Type: CmdCreate, Path: "/n00", ACL: vocab.OpenACLUnsafe, Data: []byte("again")},
		{Type: CmdSetData, Path: "/n01", Data: []byte("changed"), Version: -1},
	}})
	take()
	src := New()
	mustApply(t, src, 9, mkCreate("/elsewhere", nil, vocab.ModePersistent))
	if err := f.Restore(bytes.NewReader(snapshotBytes(t, src.View()))); err != nil {
		t.Fatal(err)
	}
	take()
	mustApply(t, f, 9, mkCreate("/later", nil, vocab.ModePersistent))
	for i, kv := range views {
		if kv.v.Digest() != kv.d || dumpView(kv.v) != kv.dump {
			t.Errorf("view %d changed after later writes", i)
		}
	}
	if _, err := views[3].v.Exists("/later"); err == nil {
		t.Error("the view taken after Restore shows a later create")
	}
}
