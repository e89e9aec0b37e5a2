package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/vocab"
)

// A property test of invariant 8 (a request is completed only by the
// committed entry that carries it): workers send random command streams,
// each in a subtree of its own so that it can predict every result exactly,
// while servers are restarted at random points. Every answer must be the
// worker's own (the path it asked for, the version its model predicts,
// its own session as ephemeral owner), every session handed out must be
// new, no server may count an entry given to the wrong waiter, and at the
// end every replica holds what the workers' models say.
//
// COORD_PROP_SEED=n replays a run's choices of operations and restart
// points (not its timing).

func TestPropertyRestartsNeverCrossResults(t *testing.T) {
	// Without snapshots a restart replays the whole log, whose entries carry
	// every earlier boot's sequence numbers; with them, restores and
	// installs come into play.
	for _, tc := range []struct {
		name      string
		servers   int
		restarts  int
		snapshots bool
	}{{"single", 1, 4, false}, {"cluster", 3, 8, false}, {"cluster-snapshots", 3, 8, true}} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("COORD_PROP_SEED"); s != "" {
				seed, _ = strconv.ParseUint(s, 10, 64)
			}
			t.Logf("seed %d (COORD_PROP_SEED)", seed)
			runRestartProperty(t, seed, tc.servers, tc.restarts, tc.snapshots)
		})
	}
}

func runRestartProperty(t *testing.T, seed uint64, servers, restarts int, snapshots bool) {
	c := NewTestClusterWith(t, servers, 0, func(cfg *Config) {
		if snapshots {
			cfg.SnapshotThreshold, cfg.TrailingLogs = 64, 16
		}
	})
	rng := rand.New(rand.NewPCG(seed, 1))
	addrs := make([]string, servers)
	for i, s := range c.Servers {
		addrs[i] = s.GRPCAddr() // a restarted server keeps its addresses
	}
	root := newSession(t, addrs[0])
	mustOK(t, root.create("/w", "", vocab.ModePersistent))
	load := &restartLoad{sessions: map[int64][]byte{}}
	load.add(t, root.id, root.pw)
	root.drop()

	const workers = 6
	var stop sync.WaitGroup
	done := make(chan struct{})
	ws := make([]*propWorker, workers)
	for i := range ws {
		ws[i] = &propWorker{t: t, id: i, rng: rand.New(rand.NewPCG(seed, uint64(i+2))), addrs: addrs, load: load,
			nodes: map[string]propNode{}, seqs: map[string]bool{}, lastSeq: -1}
		mustOK(t, newSessionOK(t, addrs[0]).create(ws[i].dir(), "", vocab.ModePersistent))
	}
	errs := make([]error, workers)
	for i, w := range ws {
		stop.Add(1)
		go func() {
			defer stop.Done()
			errs[i] = w.run(done)
		}()
	}
	for k := 0; k < restarts; k++ {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		i := rng.IntN(servers)
		t.Logf("restarting %s", c.Servers[i].ID())
		c.Restart(i)
	}
	time.Sleep(300 * time.Millisecond)
	close(done)
	stop.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	c.WaitConverged()
	ops := 0
	for _, w := range ws {
		ops += w.ops
		if err := w.checkState(c.Servers[0].View()); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	for _, s := range c.Servers {
		if n := s.rep.Stats().Mismatched; n != 0 {
			t.Errorf("%s: %d entries given to another request's waiter", s.ID(), n)
		}
	}
	t.Logf("%d operations, %d sessions, %d restarts", ops, len(load.sessions), restarts)
}

// newSessionOK is newSession retrying while a server comes up.
func newSessionOK(t testing.TB, addr string) *rawSession {
	t.Helper()
	s, err := dialRetry(t, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type propNode struct {
	data    string
	version int32
}

type propWorker struct {
	t     testing.TB
	id    int
	rng   *rand.Rand
	addrs []string
	load  *restartLoad

	s       *rawSession
	sid     int64
	pw      []byte
	lastZx  int64
	nodes   map[string]propNode // this worker's persistent nodes and what they hold
	seqs    map[string]bool     // sequential nodes it created
	lastSeq int64               // the last sequential suffix it saw
	next    int                 // names nodes and data tokens
	ops     int
}

func (w *propWorker) dir() string { return fmt.Sprintf("/w/%d", w.id) }

// errLostConn: the operation's fate is unknown; the worker re-attaches and
// settles it by reading.
var errLostConn = errors.New("lost")

func (w *propWorker) run(done <-chan struct{}) error {
	for {
		select {
		case <-done:
			return nil
		default:
		}
		if w.s == nil {
			if err := w.connect(); err != nil {
				return err
			}
		}
		settle, err := w.step()
		w.ops++
		if errors.Is(err, errLostConn) {
			w.s.drop()
			w.s = nil
			// A new session first, while the server that dropped the
			// worker may be restarting.
			if err := w.probeSession(); err != nil {
				return err
			}
			if err := w.connect(); err != nil {
				return err
			}
			if settle != nil {
				if err := settle(); errors.Is(err, errLostConn) {
					// Lost again while settling: settle on the next server.
					w.s.drop()
					w.s = nil
					if err := w.connect(); err != nil {
						return err
					}
					err = settle()
				} else if err != nil {
					return err
				}
			}
			continue
		}
		if err != nil {
			return err
		}
	}
}

// connect re-attaches the worker's session (to any server) or, the first
// time, creates one, retrying for up to 30 s while servers restart.
func (w *propWorker) connect() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		addr := w.addrs[w.rng.IntN(len(w.addrs))]
		req := &api.ConnectRequest{TimeoutMs: 20000}
		if w.sid != 0 {
			req = &api.ConnectRequest{SessionId: w.sid, Password: w.pw, TimeoutMs: 20000, LastZxid: w.lastZx}
		}
		s, err := dialSession(w.t, addr, req)
		if err == nil {
			if w.sid == 0 {
				w.load.add(w.t, s.id, s.pw)
				w.sid, w.pw = s.id, s.pw
			} else if s.id != w.sid || string(s.pw) != string(w.pw) {
				return fmt.Errorf("worker %d: re-attaching session 0x%x gave session 0x%x", w.id, w.sid, s.id)
			}
			if s.lastZx < w.lastZx {
				return fmt.Errorf("worker %d: re-attached at zxid %x after seeing %x", w.id, s.lastZx, w.lastZx)
			}
			w.s = s
			return nil
		}
		if w.sid != 0 && status.Code(err) == codes.NotFound {
			return fmt.Errorf("worker %d: session 0x%x expired while servers restarted: %v", w.id, w.sid, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("worker %d: no server took the session for 30s: %v", w.id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do sends one request; a lost connection is errLostConn.
func (w *propWorker) do(req *api.Request) (*api.Response, error) {
	r, err := w.s.tryDo(req)
	if err != nil {
		if strings.Contains(err.Error(), "zxid went back") {
			return nil, fmt.Errorf("worker %d: %v", w.id, err)
		}
		return nil, errLostConn
	}
	// SessionMoved: an attach this worker gave up on (its server restarted
	// while the attach was in the leader's log) took effect after the one
	// it then made elsewhere, so the session belongs to that dead
	// connection; the command changed nothing. As after a lost connection,
	// the worker re-attaches and settles the command by reading (a CI run
	// saw it once in this test).
	if c := vocab.Code(r.Err); c == vocab.ConnectionLoss || c == vocab.SessionMoved {
		return nil, errLostConn
	}
	if r.Zxid > w.lastZx {
		w.lastZx = r.Zxid
	}
	return r, nil
}

func (w *propWorker) token() string {
	w.next++
	return fmt.Sprintf("w%d-t%d", w.id, w.next)
}

// pick returns one of the worker's persistent nodes (not sequential), or "".
func (w *propWorker) pick() string {
	var paths []string
	for p := range w.nodes {
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return ""
	}
	slices.Sort(paths) // map order must not decide: a seed replays the choices
	return paths[w.rng.IntN(len(paths))]
}

func (w *propWorker) fail(format string, args ...any) error {
	return fmt.Errorf("worker %d (session 0x%x): %s", w.id, w.sid, fmt.Sprintf(format, args...))
}

// step runs one random operation and checks its answer against the model;
// when the connection is lost it returns how to settle the operation.
func (w *propWorker) step() (func() error, error) {
	acl := []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}
	switch x := w.rng.IntN(100); {
	case x < 25: // create a node
		path, tok := fmt.Sprintf("%s/n%d", w.dir(), w.next), w.token()
		r, err := w.do(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: path, Data: []byte(tok), Acl: acl}}})
		if err != nil {
			return func() error { return w.settleNode(path, propNode{tok, 0}, nil) }, err
		}
		if r.Err != 0 || r.GetCreate().GetPath() != path || r.GetCreate().GetStat().GetVersion() != 0 ||
			r.GetCreate().GetStat().GetDataLength() != int32(len(tok)) {
			return nil, w.fail("create %s answered %v", path, r)
		}
		w.nodes[path] = propNode{tok, 0}
	case x < 45: // setData with the right version
		path := w.pick()
		if path == "" {
			return nil, nil
		}
		old, tok := w.nodes[path], w.token()
		r, err := w.do(&api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: path, Data: []byte(tok), Version: old.version}}})
		if err != nil {
			return func() error { return w.settleNode(path, propNode{tok, old.version + 1}, &old) }, err
		}
		st := r.GetStat().GetStat()
		if r.Err != 0 || st.GetVersion() != old.version+1 || st.GetDataLength() != int32(len(tok)) {
			return nil, w.fail("setData %s at version %d answered %v", path, old.version, r)
		}
		w.nodes[path] = propNode{tok, old.version + 1}
	case x < 52: // setData with a wrong version
		path := w.pick()
		if path == "" {
			return nil, nil
		}
		old := w.nodes[path]
		r, err := w.do(&api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: path, Data: []byte("never"), Version: old.version + 5}}})
		if err != nil {
			return nil, err // refused at apply either way
		}
		if vocab.Code(r.Err) != vocab.BadVersion {
			return nil, w.fail("setData %s at a wrong version answered %v", path, r)
		}
	case x < 62: // delete
		path := w.pick()
		if path == "" {
			return nil, nil
		}
		old := w.nodes[path]
		r, err := w.do(&api.Request{Op: &api.Request_Delete{Delete: &api.DeleteRequest{Path: path, Version: old.version}}})
		if err != nil {
			return func() error { return w.settleNode(path, propNode{}, &old) }, err
		}
		if r.Err != 0 {
			return nil, w.fail("delete %s answered %v", path, r)
		}
		delete(w.nodes, path)
	case x < 77: // read
		path := w.pick()
		if path == "" {
			path = w.dir() + "/none"
		}
		r, err := w.do(&api.Request{Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: path}}})
		if err != nil {
			return nil, err
		}
		want, ok := w.nodes[path]
		got := r.GetGetData()
		if ok && (r.Err != 0 || string(got.GetData()) != want.data || got.GetStat().GetVersion() != want.version) ||
			!ok && vocab.Code(r.Err) != vocab.NoNode {
			return nil, w.fail("read %s: %v, want %+v (exists %v)", path, r, want, ok)
		}
	case x < 87: // create sequential
		prefix := w.dir() + "/s-"
		r, err := w.do(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: prefix, Data: []byte("s"), Acl: acl,
			Mode: int32(vocab.ModePersistentSequential)}}})
		if err != nil {
			return w.settleSeqs, err
		}
		path := r.GetCreate().GetPath()
		if r.Err != 0 || !strings.HasPrefix(path, prefix) {
			return nil, w.fail("sequential create answered %v", r)
		}
		n, perr := strconv.ParseInt(strings.TrimPrefix(path, prefix), 10, 64)
		if perr != nil || n <= w.lastSeq {
			return nil, w.fail("sequential create gave %s after suffix %d", path, w.lastSeq)
		}
		w.lastSeq = n
		w.seqs[path] = true
	case x < 94: // multi: create and set
		path, tok := fmt.Sprintf("%s/m%d", w.dir(), w.next), w.token()
		r, err := w.do(&api.Request{Op: &api.Request_Multi{Multi: &api.MultiRequest{Ops: []*api.MultiOp{
			{Op: &api.MultiOp_Create{Create: &api.CreateRequest{Path: path, Data: []byte("m"), Acl: acl}}},
			{Op: &api.MultiOp_SetData{SetData: &api.SetDataRequest{Path: path, Data: []byte(tok), Version: 0}}},
		}}}})
		if err != nil {
			return func() error { return w.settleNode(path, propNode{tok, 1}, nil) }, err
		}
		res := r.GetMulti().GetResults()
		if r.Err != 0 || len(res) != 2 || res[0].GetPath() != path || res[1].GetStat().GetVersion() != 1 {
			return nil, w.fail("multi on %s answered %v", path, r)
		}
		w.nodes[path] = propNode{tok, 1}
	case x < 97: // a short-lived second session on any server
		return nil, w.probeSession()
	default: // an ephemeral: owned by this session
		path := fmt.Sprintf("%s/e%d", w.dir(), w.next)
		w.next++
		r, err := w.do(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: path, Acl: acl, Mode: int32(vocab.ModeEphemeral)}}})
		if err != nil {
			return nil, err
		}
		if r.Err != 0 || r.GetCreate().GetPath() != path || r.GetCreate().GetStat().GetEphemeralOwner() != w.sid {
			return nil, w.fail("ephemeral create %s answered %v", path, r)
		}
	}
	return nil, nil
}

// probeSession opens a new session on a random server (retrying while it
// restarts: the window in which a restarted server's requests meet the
// replay of its previous boots' entries), checks that it is new and its
// own (an ephemeral it creates is owned by it), and closes it.
func (w *propWorker) probeSession() error {
	addr := w.addrs[w.rng.IntN(len(w.addrs))]
	p, err := dialRetry(w.t, addr, &api.ConnectRequest{TimeoutMs: 20000})
	if err != nil {
		return w.fail("probe session on %s: %v", addr, err)
	}
	defer p.drop()
	w.load.add(w.t, p.id, p.pw)
	if len(p.pw) != 16 || p.id == 0 {
		return w.fail("probe session 0x%x with password %x", p.id, p.pw)
	}
	path := fmt.Sprintf("%s/p%d", w.dir(), w.next)
	w.next++
	r, err := p.tryDo(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: path, Mode: int32(vocab.ModeEphemeral),
		Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}})
	if lost(r, err) {
		return nil // its fate does not matter: the session goes
	}
	if r.Err != 0 || r.GetCreate().GetPath() != path || r.GetCreate().GetStat().GetEphemeralOwner() != p.id {
		return w.fail("probe session 0x%x: ephemeral create %s answered %v", p.id, path, r)
	}
	r, err = p.tryDo(&api.Request{Op: &api.Request_Close{Close: &api.CloseSession{}}})
	if !lost(r, err) && r.Err != 0 {
		return w.fail("probe session 0x%x: close answered %v", p.id, r)
	}
	return nil
}

// settleNode learns, after a lost connection, whether a write to path took
// effect: the node now holds after (a zero after: it is gone) or still
// holds before (nil: it did not exist). Anything else is an error.
func (w *propWorker) settleNode(path string, after propNode, before *propNode) error {
	r, err := w.do(&api.Request{Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: path}}})
	if err != nil {
		return err
	}
	got := r.GetGetData()
	now, exists := propNode{string(got.GetData()), got.GetStat().GetVersion()}, r.Err == 0
	if !exists && vocab.Code(r.Err) != vocab.NoNode {
		return w.fail("settling %s: %v", path, r)
	}
	switch {
	case after != (propNode{}) && exists && now == after,
		after == (propNode{}) && !exists:
		if exists {
			w.nodes[path] = now
		} else {
			delete(w.nodes, path)
		}
	case before != nil && exists && now == *before,
		before == nil && !exists:
		// It did not take effect.
	default:
		return w.fail("settling %s: it holds %+v (exists %v); want %+v or %+v", path, now, exists, after, before)
	}
	return nil
}

// settleSeqs learns which sequential nodes exist after a lost connection.
func (w *propWorker) settleSeqs() error {
	r, err := w.do(&api.Request{Op: &api.Request_GetChildren{GetChildren: &api.GetChildrenRequest{Path: w.dir()}}})
	if err != nil {
		return err
	}
	if r.Err != 0 {
		return w.fail("listing %s: %v", w.dir(), r)
	}
	for _, k := range r.GetGetChildren().GetChildren() {
		if p := w.dir() + "/" + k; strings.HasPrefix(k, "s-") && !w.seqs[p] {
			w.seqs[p] = true
			if n, _ := strconv.ParseInt(strings.TrimPrefix(k, "s-"), 10, 64); n > w.lastSeq {
				w.lastSeq = n
			}
		}
	}
	return nil
}

// checkState compares the worker's subtree on a replica with its model.
func (w *propWorker) checkState(v *fsm.View) error {
	kids, _, err := v.GetChildren(w.dir(), nil)
	if err != nil {
		return w.fail("listing %s: %v", w.dir(), err)
	}
	have := map[string]bool{}
	for _, k := range kids {
		p := w.dir() + "/" + k
		have[p] = true
		switch {
		case strings.HasPrefix(k, "e"), strings.HasPrefix(k, "p"):
		case strings.HasPrefix(k, "s-"):
			if !w.seqs[p] {
				return w.fail("%s exists but the worker never created it", p)
			}
		default:
			want, ok := w.nodes[p]
			data, st, _ := v.GetData(p, nil)
			if !ok || string(data) != want.data || st.Version != want.version {
				return w.fail("%s holds %q at version %d; the model says %+v (known %v)", p, data, st.Version, want, ok)
			}
		}
	}
	for p := range w.nodes {
		if !have[p] {
			return w.fail("%s is missing", p)
		}
	}
	for p := range w.seqs {
		if !have[p] {
			return w.fail("sequential %s is missing", p)
		}
	}
	return nil
}
