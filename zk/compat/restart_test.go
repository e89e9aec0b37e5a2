package compat

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A server process crashes (SIGKILL) and starts again on the same ports and
// data, and many clients race its start-up: they dial every 10 ms while the
// port comes up, open sessions and write at once, while the clients whose
// sessions predate the crash re-attach. Every client must get a session of
// its own (an id no other client was handed, before or after the crash,
// and the password the server keeps for that id: re-attaching with it
// works), every write's reply must be what a read then shows (the client's
// own node, data, version and mzxid), the old sessions keep their ids and
// their ephemerals, and what was acknowledged before the crash is still
// there. DESIGN.md, invariant 8: a restarted server must not complete its
// new requests with the results of entries from its previous life (issue
// 12: coord handed a new client the old client's session id and password).
func TestCrashRestartClients(t *testing.T) {
	t.Run("1 server", func(t *testing.T) { testCrashRestart(t, 1, false, procOpts{}) })
	t.Run("3 servers, restart a follower", func(t *testing.T) { testCrashRestart(t, 3, false, procOpts{}) })
	t.Run("3 servers, restart the leader", func(t *testing.T) { testCrashRestart(t, 3, true, procOpts{}) })
	// The same on coord's other raft log store (raft-boltdb; the default
	// is raft-wal).
	bolt := procOpts{coordArgs: []string{"-log-store", "bolt"}}
	for _, restartLeader := range []bool{false, true} {
		who := map[bool]string{false: "a follower", true: "the leader"}[restartLeader]
		t.Run("3 servers on the bolt log store, restart "+who, func(t *testing.T) {
			if target() != "coord" {
				t.Skip("a coord log store")
			}
			testCrashRestart(t, 3, restartLeader, bolt)
		})
	}
}

const (
	crashRoot     = "/crash"
	crashOld      = 4  // clients whose sessions predate the crash
	crashOldSeqs  = 20 // sequential nodes each of them creates before the crash
	crashNewGo    = 20 // go-zookeeper clients that connect as the server restarts
	crashNewKazoo = 3  // kazoo clients that do the same
	// crashPatience bounds every wait after the restart.
	crashPatience = 30 * time.Second
)

func testCrashRestart(t *testing.T, n int, restartLeader bool, o procOpts) {
	haveKazoo := exec.Command(python3, "-c", "import kazoo").Run() == nil
	if !haveKazoo {
		t.Logf("%s cannot import kazoo (apt-get install python3-kazoo): go-zookeeper clients only", python3)
	}
	cl := newProcClusterOpts(t, n, o)
	victim := 0
	if n > 1 {
		leader := cl.Leader()
		victim = (leader + 1) % n
		if restartLeader {
			victim = leader
		}
	}
	// Every client talks to the victim only, so that the requests it
	// proposed before the crash are in the log it replays, and the new
	// clients meet it as soon as it listens.
	addr := cl.Addr(victim)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // runs after the clients' Close

	// Before the crash: sessions with ephemerals, persistent sequential
	// nodes and setData, all acknowledged.
	type oldClient struct {
		c      *client
		d      *crashDialer
		id     int64
		passwd []byte
		eph    string
	}
	var olds []*oldClient
	seqOwner := map[string]string{} // sequential node made before the crash → its client
	for i := 0; i < crashOld; i++ {
		name := fmt.Sprintf("old%d", i)
		c, d := crashConnect(t, name, addr, stop)
		if _, ok := c.rec.waitFor(isSessionState(zk.StateHasSession), wait); !ok {
			t.Fatalf("%s: no session within %v: %v", name, wait, c.rec.all())
		}
		o := &oldClient{c: c, d: d, id: c.SessionID()}
		var err error
		if o.passwd, err = d.passwdOf(o.id); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if i == 0 {
			c.create(crashRoot, "", 0)
		}
		o.eph = c.create(crashRoot+"/oldeph-"+name, name, zk.FlagEphemeral)
		c.create(crashRoot+"/old-"+name, "v0", 0)
		for j := 0; j < crashOldSeqs; j++ {
			seqOwner[c.create(crashRoot+"/seq-", name, zk.FlagSequence)] = name
			if _, err := c.Set(crashRoot+"/old-"+name, []byte(fmt.Sprintf("v%d", j+1)), int32(j)); err != nil {
				t.Fatalf("%s: setData: %v", name, err)
			}
		}
		olds = append(olds, o)
	}
	seen := newSessionBook()
	for _, o := range olds {
		seen.add(t, o.c.name, o.id, o.passwd)
	}

	// kazoo clients are started now and wait, imported and ready, for the
	// word to connect.
	var kazoos []*kazooRacer
	if haveKazoo {
		for i := 0; i < crashNewKazoo; i++ {
			kazoos = append(kazoos, startKazooRacer(t, addr, fmt.Sprintf("kz%d", i)))
		}
		for _, k := range kazoos {
			k.waitReady(t)
		}
	}

	// The crash, and the race.
	marks := make([]int, len(olds))
	for i, o := range olds {
		marks[i] = o.c.mark()
	}
	goSignal := make(chan struct{})
	newReports := make([]*crashReport, crashNewGo)
	oldReports := make([]*crashReport, len(olds))
	var wg sync.WaitGroup
	for i := range crashNewGo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &crashReport{name: fmt.Sprintf("go%02d", i)}
			newReports[i] = r
			defer r.sessionChecks()
			<-goSignal
			r.c, r.d = crashConnect(t, r.name, addr, stop)
			if _, ok := r.c.rec.waitFor(isSessionState(zk.StateHasSession), crashPatience); !ok {
				r.errorf("no session within %v: %v", crashPatience, r.c.rec.all())
				return
			}
			r.id = r.c.SessionID()
			var err error
			if r.passwd, err = r.d.passwdOf(r.id); err != nil {
				r.errorf("%v", err)
			}
			crashWrites(r)
		}()
	}
	for i, o := range olds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &crashReport{name: o.c.name, c: o.c, d: o.d}
			oldReports[i] = r
			defer r.sessionChecks()
			<-goSignal
			if _, ok := o.c.rec.waitForSince(marks[i], isSessionState(zk.StateHasSession), crashPatience); !ok {
				r.errorf("did not re-attach within %v: %v", crashPatience, o.c.rec.since(marks[i]))
				return
			}
			r.id = o.c.SessionID()
			if r.id != o.id {
				r.errorf("re-attached as session %#x; its session is %#x", r.id, o.id)
			}
			var err error
			if r.passwd, err = o.d.passwdOf(o.id); err != nil {
				r.errorf("%v", err)
			} else if !bytes.Equal(r.passwd, o.passwd) {
				r.errorf("re-attaching, the server handed it password %x for session %#x; it was %x", r.passwd, o.id, o.passwd)
			}
			var st *zk.Stat
			var ok bool
			if err := retryConn(r, "exists "+o.eph, func() (err error) { ok, st, err = o.c.Exists(o.eph); return }); err != nil {
				r.errorf("exists %s: %v", o.eph, err)
			} else if !ok || st.EphemeralOwner != o.id {
				r.errorf("its ephemeral %s after the restart: exists %v, stat %+v; want owner %#x", o.eph, ok, st, o.id)
			}
			crashWrites(r)
		}()
	}

	cl.Restart(victim) // SIGKILL, and start again at once
	started := time.Now()
	close(goSignal)
	for _, k := range kazoos {
		k.release(t)
	}
	wg.Wait()
	var kazooReports []*crashReport
	for _, k := range kazoos {
		kazooReports = append(kazooReports, k.result(t))
	}
	t.Logf("%s, %d server(s), restarted server %d: %d new go-zookeeper and %d kazoo clients and %d old ones done %v after the restart",
		cl.Name(), n, victim, crashNewGo, len(kazoos), len(olds), time.Since(started).Round(time.Millisecond))

	// Each client's own view.
	all := slices.Concat(oldReports, newReports, kazooReports)
	for _, r := range all {
		for _, e := range r.errs {
			t.Errorf("%s: %s", r.name, e)
		}
	}
	// Nobody was handed a session someone else holds.
	for _, r := range slices.Concat(newReports, kazooReports) {
		if r.id != 0 {
			seen.add(t, r.name, r.id, r.passwd)
		}
	}
	// Nobody was told it created a node someone else created.
	created := map[string]string{}
	for _, r := range all {
		if r.path == "" {
			continue
		}
		if o, ok := created[r.path]; ok {
			t.Errorf("%s and %s were both told they created %s", o, r.name, r.path)
		}
		if o, ok := seqOwner[r.path]; ok {
			t.Errorf("%s was told it created %s, which %s created before the crash", r.name, r.path, o)
		}
		created[r.path] = r.name
	}
	if t.Failed() {
		return
	}

	// The password each new client holds is its session's: re-attaching
	// with it keeps the session (go-zookeeper: drop the connection and let
	// the client re-attach; kazoo has exited without closing its session:
	// re-attach with a raw handshake).
	for _, r := range newReports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := r.c.mark()
			r.d.dropConns()
			if _, ok := r.c.rec.waitForSince(m, isSessionState(zk.StateHasSession), crashPatience); !ok {
				r.errorf("did not re-attach after its connection dropped: %v", r.c.rec.since(m))
				return
			}
			if _, expired := r.c.rec.waitForSince(m, isSessionState(zk.StateExpired), 0); expired || r.c.SessionID() != r.id {
				r.errorf("re-attaching with session %#x and its password: now session %#x, events %v", r.id, r.c.SessionID(), r.c.rec.since(m))
			}
		}()
	}
	wg.Wait()
	for _, r := range kazooReports {
		rc := rawConnect(t, addr, rawConnectOpts{sessionID: r.id, passwd: r.passwd})
		if rc.SessionID != r.id || rc.Timeout <= 0 {
			r.errorf("re-attaching with session %#x and its password: the server answered session %#x, timeout %d", r.id, rc.SessionID, rc.Timeout)
		}
	}
	for _, r := range all {
		for _, e := range r.errs {
			t.Errorf("%s: %s", r.name, e)
		}
		r.errs = nil
	}

	// What was acknowledged, before the crash and after, is there.
	check := olds[0].c
	for p, owner := range seqOwner {
		if d, _, err := check.Get(p); err != nil || string(d) != owner {
			t.Errorf("%s's node %s, created before the crash: %q, %v", owner, p, d, err)
		}
	}
	for _, o := range olds {
		p := crashRoot + "/old-" + o.c.name
		if d, st, err := check.Get(p); err != nil || string(d) != fmt.Sprintf("v%d", crashOldSeqs) || st.Version != crashOldSeqs {
			t.Errorf("%s's node %s, set %d times before the crash: %q, %+v, %v", o.c.name, p, crashOldSeqs, d, st, err)
		}
	}
	for _, r := range all {
		if d, st, err := check.Get(r.path); err != nil || string(d) != r.name+"/v1" || st.Mzxid != r.setMzxid {
			t.Errorf("%s's node %s: %q, %+v, %v; want %q with the mzxid %#x of its setData reply", r.name, r.path, d, st, err, r.name+"/v1", r.setMzxid)
		}
	}
}

// crashReport is what one client saw; a client's goroutine fills it and the
// test checks it once the goroutines are done.
type crashReport struct {
	name     string
	c        *client // go-zookeeper clients
	d        *crashDialer
	id       int64
	passwd   []byte
	path     string // the sequential node it created after the restart
	setMzxid int64  // the mzxid in its setData reply
	errs     []string
}

func (r *crashReport) errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// crashWrites is what each go-zookeeper client does once it has its
// session: a sequential node with data naming the client, setData on it,
// an ephemeral, each reply checked against a read.
func crashWrites(r *crashReport) {
	c := r.c
	var path string
	if err := retryConn(r, "create", func() (err error) {
		path, err = c.Create(crashRoot+"/new-", []byte(r.name), zk.FlagSequence, zk.WorldACL(zk.PermAll))
		return err
	}); err != nil {
		r.errorf("create %s/new-: %v", crashRoot, err)
		return
	}
	r.path = path
	var data []byte
	var st *zk.Stat
	if err := retryConn(r, "getData", func() (err error) { data, st, err = c.Get(path); return }); err != nil {
		r.errorf("getData %s, which it was told it created: %v", path, err)
		return
	}
	if string(data) != r.name || st.Version != 0 || st.Czxid != st.Mzxid {
		r.errorf("create %s: reads back %q, version %d, czxid %#x, mzxid %#x; want its own data %q at version 0",
			path, data, st.Version, st.Czxid, st.Mzxid, r.name)
	}
	want := r.name + "/v1"
	var st1 *zk.Stat
	version := int32(0)
	if err := retryConn(r, "setData", func() (err error) {
		st1, err = c.Set(path, []byte(want), version)
		version = -1 // a retry may find its own write applied
		return err
	}); err != nil {
		r.errorf("setData %s: %v", path, err)
		return
	}
	r.setMzxid = st1.Mzxid
	if st1.Version < 1 || st1.Czxid != st.Czxid || st1.Mzxid <= st.Mzxid {
		r.errorf("setData %s: reply version %d, czxid %#x, mzxid %#x; the node's czxid is %#x", path, st1.Version, st1.Czxid, st1.Mzxid, st.Czxid)
	}
	var st2 *zk.Stat
	if err := retryConn(r, "getData", func() (err error) { data, st2, err = c.Get(path); return }); err != nil {
		r.errorf("getData %s: %v", path, err)
		return
	}
	if string(data) != want || st2.Version != st1.Version || st2.Mzxid != st1.Mzxid {
		r.errorf("setData %s: reply version %d, mzxid %#x; a read then shows %q, version %d, mzxid %#x",
			path, st1.Version, st1.Mzxid, data, st2.Version, st2.Mzxid)
	}
	eph := crashRoot + "/neweph-" + r.name
	tries := 0
	if err := retryConn(r, "create ephemeral", func() error {
		tries++
		got, err := c.Create(eph, []byte(r.name), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil && got != eph {
			r.errorf("create %s: reply names %s", eph, got)
		}
		if tries > 1 && errors.Is(err, zk.ErrNodeExists) {
			return nil // a retry found its own node; the owner check tells
		}
		return err
	}); err != nil {
		r.errorf("create %s: %v", eph, err)
		return
	}
	var ok bool
	if err := retryConn(r, "exists", func() (err error) { ok, st, err = c.Exists(eph); return }); err != nil || !ok || st.EphemeralOwner != r.id {
		r.errorf("its ephemeral %s: exists %v, %v, stat %+v; want owner %#x", eph, ok, err, st, r.id)
	}
	if id := c.SessionID(); id != r.id {
		r.errorf("session changed under the client: %#x, was %#x", id, r.id)
	}
}

// sessionChecks reports what went wrong with a go-zookeeper client's
// session whatever else it got to do.
func (r *crashReport) sessionChecks() {
	if r.c == nil {
		return
	}
	if _, expired := r.c.rec.waitFor(isSessionState(zk.StateExpired), 0); expired {
		r.errorf("was told its session expired: %v", r.c.rec.all())
	}
	r.errs = append(r.errs, r.d.badHandshakes()...)
}

// retryConn runs op until it succeeds or fails other than by a lost
// connection (which a client answers by re-sending), for up to
// crashPatience.
func retryConn(r *crashReport, what string, op func() error) error {
	deadline := time.Now().Add(crashPatience)
	for {
		err := op()
		switch {
		case err == nil:
			return nil
		case err.Error() == connectionLossReply:
			r.errorf("%s: the server answered with ConnectionLoss (-4) instead of dropping the connection", what)
		case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionMoved):
		default:
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isSessionState(s zk.State) func(zk.Event) bool {
	return func(e zk.Event) bool { return e.Type == zk.EventSession && e.State == s }
}

// sessionBook remembers every session id and password handed to a client,
// to find one handed to two.
type sessionBook struct {
	byID     map[int64]string
	byPasswd map[string]string
}

func newSessionBook() *sessionBook {
	return &sessionBook{byID: map[int64]string{}, byPasswd: map[string]string{}}
}

func (b *sessionBook) add(t testing.TB, owner string, id int64, passwd []byte) {
	t.Helper()
	if o, ok := b.byID[id]; ok && o != owner {
		t.Errorf("%s was handed session %#x (password %x), which is %s's", owner, id, passwd, o)
		return
	}
	b.byID[id] = owner
	if len(passwd) == 0 {
		t.Errorf("%s: session %#x has an empty password", owner, id)
		return
	}
	if o, ok := b.byPasswd[string(passwd)]; ok && o != owner {
		t.Errorf("%s's session %#x has the password of %s's session (%x)", owner, id, o, passwd)
	}
	b.byPasswd[string(passwd)] = owner
}

// crashConnect starts a go-zookeeper client on addr whose dials retry every
// 10 ms while the port is closed (go-zookeeper itself waits a second
// between rounds), and returns without waiting for its session.
func crashConnect(t testing.TB, name, addr string, stop <-chan struct{}) (*client, *crashDialer) {
	d := &crashDialer{stop: stop}
	c := &client{t: t, name: name, rec: newRecorder()}
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(newLogSink(t)), zk.WithLogInfo(false),
		zk.WithEventCallback(c.rec.add), zk.WithDialer(d.dial))
	if err != nil {
		panic(err) // only for a malformed address
	}
	c.Conn = conn
	t.Cleanup(conn.Close)
	return c, d
}

// crashDialer dials with retries and reads, on each connection, the
// server's answer to the client's handshake: the session id and password
// it handed out.
type crashDialer struct {
	stop  <-chan struct{}
	mu    sync.Mutex
	conns []net.Conn
	hands []handshake
}

type handshake struct {
	id      int64
	passwd  []byte
	timeout int32
}

func (d *crashDialer) dial(network, addr string, _ time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(crashPatience)
	for {
		nc, err := net.DialTimeout(network, addr, time.Second)
		if err == nil {
			d.mu.Lock()
			d.conns = append(d.conns, nc)
			d.mu.Unlock()
			sc := &snoopConn{Conn: nc, d: d}
			// A connect timeout, as ZooKeeper's Java client and kazoo have
			// (go-zookeeper waits ten read timeouts, about a minute): a
			// ZooKeeper server still loading its database may take the
			// handshake and never answer it.
			time.AfterFunc(handshakeTimeout, func() {
				if !sc.answered.Load() {
					nc.Close()
				}
			})
			return sc, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-d.stop:
			return nil, err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// dropConns closes the client's connections under it.
func (d *crashDialer) dropConns() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, nc := range d.conns {
		nc.Close()
	}
	d.conns = nil
}

// passwdOf returns the password the server handed with session id, and
// an error if it handed different ones.
func (d *crashDialer) passwdOf(id int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pw []byte
	found := false
	for _, h := range d.hands {
		if h.id != id {
			continue
		}
		if found && !bytes.Equal(pw, h.passwd) {
			return nil, fmt.Errorf("the server handed session %#x passwords %x and %x", id, pw, h.passwd)
		}
		pw, found = h.passwd, true
	}
	if !found {
		return nil, fmt.Errorf("no handshake for session %#x seen", id)
	}
	return pw, nil
}

// badHandshakes describes the server's answers that handed the client no
// session (id 0: ZooKeeper's answer for an expired session, which none of
// these is) or a session without a password.
func (d *crashDialer) badHandshakes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, h := range d.hands {
		if h.id == 0 || len(h.passwd) == 0 {
			out = append(out, fmt.Sprintf("the server answered a handshake with session %#x, password %x, timeout %d", h.id, h.passwd, h.timeout))
		}
	}
	return out
}

// snoopConn passes everything through and decodes the first frame the
// server sends (the ConnectResponse).
type snoopConn struct {
	net.Conn
	d        *crashDialer
	buf      []byte
	answered atomic.Bool
}

// handshakeTimeout bounds the wait for the server's answer to a
// ConnectRequest.
const handshakeTimeout = 2 * time.Second

func (c *snoopConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.answered.Load() || n == 0 {
		return n, err
	}
	c.buf = append(c.buf, p[:n]...)
	if len(c.buf) < 4 {
		return n, err
	}
	l := int(binary.BigEndian.Uint32(c.buf))
	if len(c.buf) < 4+l {
		return n, err
	}
	r := jr{b: c.buf[4 : 4+l]}
	r.int() // protocolVersion
	h := handshake{timeout: r.int(), id: r.long()}
	h.passwd = append([]byte(nil), r.buf()...)
	if r.err == nil {
		c.d.mu.Lock()
		c.d.hands = append(c.d.hands, h)
		c.d.mu.Unlock()
	}
	c.buf = nil
	c.answered.Store(true)
	return n, err
}

// kazooRacer is a kazoo client (testdata/kazoo_restart.py) in its own
// process, imported and waiting for the word to connect.
type kazooRacer struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	done   chan struct{}
}

func startKazooRacer(t testing.TB, addr, name string) *kazooRacer {
	t.Helper()
	k := &kazooRacer{name: name, lines: make(chan string, 100), done: make(chan struct{})}
	k.cmd = exec.Command(python3, "testdata/kazoo_restart.py", addr, name, crashRoot)
	k.cmd.Stderr = &k.stderr
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if k.stdin, err = k.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			k.lines <- sc.Text()
		}
		close(k.lines)
		k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(func() {
		k.cmd.Process.Kill()
		select {
		case <-k.done:
		case <-time.After(10 * time.Second):
		}
	})
	return k
}

func (k *kazooRacer) line(t testing.TB, within time.Duration) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-k.lines:
		return l, ok
	case <-time.After(within):
		t.Fatalf("%s: no output within %v", k.name, within)
	}
	return "", false
}

func (k *kazooRacer) waitReady(t testing.TB) {
	t.Helper()
	if l, _ := k.line(t, 30*time.Second); l != "ready" {
		<-k.done
		t.Fatalf("%s: %q instead of ready; stderr:\n%s", k.name, l, k.stderr.String())
	}
}

// release tells the client to connect.
func (k *kazooRacer) release(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
}

// result reads the client's report.
func (k *kazooRacer) result(t testing.TB) *crashReport {
	t.Helper()
	l, ok := k.line(t, 60*time.Second)
	if !ok || !strings.HasPrefix(l, "{") {
		select {
		case <-k.done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("%s: %q instead of its report; stderr:\n%s", k.name, l, k.stderr.String())
	}
	var rep struct {
		SessionID int64    `json:"session_id"`
		Passwd    string   `json:"passwd"`
		Path      string   `json:"path"`
		SetMzxid  int64    `json:"set_mzxid"`
		Errors    []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(l), &rep); err != nil {
		t.Fatalf("%s: %v in %q", k.name, err, l)
	}
	r := &crashReport{name: k.name, id: rep.SessionID, path: rep.Path, setMzxid: rep.SetMzxid, errs: rep.Errors}
	var err error
	if r.passwd, err = hex.DecodeString(rep.Passwd); err != nil {
		r.errorf("password %q: %v", rep.Passwd, err)
	}
	return r
}
