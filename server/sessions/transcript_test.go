package sessions

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coord/fsm"
	"coord/session"
	"coord/vocab"
	"coord/watch"
	"coord/zxid"
)

// The transcript tests: scripts in testdata/*.txt drive the session layer
// on a fake replica (fake_test.go) with no raft, no network and no disk,
// and state what each session's outbound stream carries, in order.
// testdata/README.md describes the script language.
//
//	go test ./server/sessions -run TestTranscripts             # run them
//	go test ./server/sessions -run TestTranscripts/acl         # one script
//	go test ./server/sessions -run TestTranscripts -update     # rewrite the expected output

var update = flag.Bool("update", false, "rewrite the expected output in testdata/*.txt with what the session layer does")

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rewritten, mismatches := runScript(t, file, string(src))
			if *update {
				if rewritten != string(src) {
					if err := os.WriteFile(file, []byte(rewritten), 0o644); err != nil {
						t.Fatal(err)
					}
					t.Logf("rewrote %s", file)
				}
				return
			}
			for _, m := range mismatches {
				t.Error(m)
			}
		})
	}
}

// The runner is shown to fail: a checked-in script whose expectation is
// wrong (testdata/planted/wrong_reply.txt claims a session reads data it
// did not write) is reported, at the wrong line, with a diff of what was
// wanted and what the session layer did.
func TestTranscriptRunnerReportsMismatch(t *testing.T) {
	const file = "testdata/planted/wrong_reply.txt"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, mismatches := runScript(t, file, string(src))
	if len(mismatches) != 1 {
		t.Fatalf("the runner reported %d mismatches in %s, want exactly 1: %v", len(mismatches), file, mismatches)
	}
	msg := mismatches[0].Error()
	for _, want := range []string{
		file + ":13:", // the wrong line
		"\n  a: setData /x -> OK version=1 zxid=3\n",
		"\n- a: getData /x -> OK \"planted\" version=1 zxid=3\n",
		"\n+ a: getData /x -> OK \"v2\" version=1 zxid=3\n",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the mismatch report lacks %q:\n%s", want, msg)
		}
	}
}

// A stanza is one step of a script: command lines, "----", and the output
// expected (up to a blank line or the end).
type stanza struct {
	cmds     []scriptLine
	sep      int // index of the "----" line
	outStart int // index of the first output line
	outEnd   int // index after the last one
}

type scriptLine struct {
	n    int // 1-based line number
	text string
}

func parseScript(t testing.TB, file, src string) ([]string, []stanza) {
	lines := strings.Split(src, "\n")
	var stanzas []stanza
	var cur []scriptLine
	for i := 0; i < len(lines); i++ {
		text := strings.TrimSpace(lines[i])
		switch {
		case text == "----":
			if len(cur) == 0 {
				t.Fatalf("%s:%d: ---- with no command before it", file, i+1)
			}
			st := stanza{cmds: cur, sep: i, outStart: i + 1}
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) != "" {
				j++
			}
			st.outEnd = j
			stanzas = append(stanzas, st)
			cur, i = nil, j
		case text == "" && len(cur) > 0:
			t.Fatalf("%s:%d: a blank line inside a stanza (commands must be followed by ----)", file, i+1)
		case text == "" || strings.HasPrefix(text, "#"):
		default:
			cur = append(cur, scriptLine{n: i + 1, text: text})
		}
	}
	if len(cur) > 0 {
		t.Fatalf("%s:%d: commands with no ---- after them", file, cur[0].n)
	}
	return lines, stanzas
}

// runScript runs a script and returns it with each stanza's output replaced
// by what happened, and a mismatch for each stanza whose output differs.
// A script that cannot run (a syntax error, an unknown session) fails t.
func runScript(t testing.TB, file, src string) (string, []error) {
	lines, stanzas := parseScript(t, file, src)
	w := newWorld(t, file)
	defer w.close()
	var mismatches []error
	var out []string
	last := 0
	for _, st := range stanzas {
		w.out = nil
		for _, cmd := range st.cmds {
			w.line = cmd.n
			w.run(cmd.text)
			w.settle()
			w.flush()
		}
		got := w.out
		want := lines[st.outStart:st.outEnd]
		for i := range want {
			want[i] = strings.TrimRight(want[i], " \t")
		}
		if !slices.Equal(got, want) {
			first := 0
			for first < min(len(want), len(got)) && want[first] == got[first] {
				first++
			}
			mismatches = append(mismatches, fmt.Errorf("%s:%d: output of the stanza at line %d differs (-want +got):\n%s",
				file, st.outStart+first+1, st.cmds[0].n, diffLines(want, got)))
		}
		out = append(out, lines[last:st.outStart]...)
		out = append(out, got...)
		last = st.outEnd
	}
	out = append(out, lines[last:]...)
	return strings.Join(out, "\n"), mismatches
}

// diffLines is a line diff of want and got: common lines indented, lines
// only wanted marked "-", lines only got marked "+".
func diffLines(want, got []string) string {
	// lcs[i][j]: the longest common subsequence of want[i:] and got[j:].
	lcs := make([][]int, len(want)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(got)+1)
	}
	for i := len(want) - 1; i >= 0; i-- {
		for j := len(got) - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case i < len(want) && j < len(got) && want[i] == got[j]:
			b.WriteString("  " + want[i] + "\n")
			i, j = i+1, j+1
		case i < len(want) && (j == len(got) || lcs[i+1][j] >= lcs[i][j+1]):
			b.WriteString("- " + want[i] + "\n")
			i++
		default:
			b.WriteString("+ " + got[j] + "\n")
			j++
		}
	}
	return b.String()
}

// world is a session layer on a fake replica, and the sessions of a script.
type world struct {
	t        testing.TB
	file     string
	line     int
	clock    *fakeClock
	rep      *fakeReplica
	l        *Layer
	readOnly atomic.Bool
	sessions map[string]*tsession
	order    []*tsession
	out      []string // the current stanza's output
}

// tsession is a session of the script, as its client knows it.
type tsession struct {
	name     string
	id       int64
	password []byte
	lastZxid int64 // the largest zxid of a reply (the client's lastZxidSeen)
	conn     *tconn
}

// tconn is one connection of a session: the requests handed to Conn.Handle
// in order by a goroutine of its own, as a front end's reader does, and
// what its outbound stream carried.
type tconn struct {
	c        *Conn
	reqs     chan *Request
	handled  atomic.Int64 // requests Handle returned from
	sent     int
	answered int
	kinds    []OpKind         // of the requests sent, in order
	what     map[int64]string // xid → the request as the output names it
	xid      int64
	closing  bool     // a close was answered: the connection is ending
	ended    bool     // its end was reported
	pending  []string // output lines not yet flushed
}

func newWorld(t testing.TB, file string) *world {
	clock := &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	w := &world{t: t, file: file, clock: clock, rep: newFakeReplica(clock), sessions: map[string]*tsession{}}
	tick := time.Second
	l, err := New(Config{
		ServerID:       "1",
		Bounds:         session.DefaultBounds(tick),
		MaxDataBytes:   1 << 20,
		MaxOutstanding: 1000,
		MaxQueuedBytes: 1 << 20,
		SuperDigest:    vocab.DigestID("super", "secret"),
		Clock:          clock,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:        noMetrics{},
		WaitServing: func(ctx context.Context) error {
			if w.readOnly.Load() {
				return errors.New("no contact with a leader")
			}
			return nil
		},
		ReadOnly: w.readOnly.Load,
	}, tick)
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	w.rep.obs = l
	l.Attach(w.rep)
	return w
}

// close applies what waits in the log and ends every connection, so that
// no goroutine of the script outlives it.
func (w *world) close() {
	w.rep.setHold(false)
	for _, s := range w.order {
		if s.conn != nil {
			s.conn.c.Shut(nil)
			close(s.conn.reqs)
		}
	}
}

func (w *world) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s:%d: %s", w.file, w.line, fmt.Sprintf(format, args...))
}

func (w *world) session(name string) *tsession {
	s := w.sessions[name]
	if s == nil {
		w.fatalf("no session %q (connect it first)", name)
	}
	return s
}

// print adds a line to the output, with session ids written as their
// sessions' names.
func (w *world) print(format string, args ...any) {
	w.out = append(w.out, w.names(fmt.Sprintf(format, args...)))
}

var hexID = regexp.MustCompile(`0x[0-9a-f]+`)

func (w *world) names(s string) string {
	return hexID.ReplaceAllStringFunc(s, func(h string) string {
		id, err := strconv.ParseUint(h[2:], 16, 64)
		if err != nil {
			return h
		}
		for _, ss := range w.order {
			if ss.id == int64(id) {
				return ss.name
			}
		}
		return h
	})
}

func (w *world) run(line string) {
	args := tokenize(line)
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "connect", "reconnect":
		if len(args) < 2 {
			w.fatalf("usage: %s <session> [options]", args[0])
		}
		w.connect(args[0] == "reconnect", args[1], args[2:])
	case "hold":
		w.rep.setHold(true)
	case "apply":
		n := -1
		if len(args) > 1 {
			n = w.atoi(args[1])
		}
		w.rep.apply(n)
	case "release":
		w.rep.setHold(false)
	case "refuse":
		w.rep.refuseNext(w.atoi(args[1]))
	case "log":
		cmds := w.rep.pendingCommands()
		if len(cmds) == 0 {
			w.print("log: empty")
		}
		for _, cmd := range cmds {
			w.print("log: %s", w.describeCommand(cmd))
		}
	case "tick":
		if len(args) != 2 {
			w.fatalf("usage: tick <duration>")
		}
		d, err := time.ParseDuration(args[1])
		if err != nil {
			w.fatalf("tick: %v", err)
		}
		w.clock.advance(d)
		w.l.Expire(w.clock.Now())
	case "readonly":
		switch {
		case len(args) == 2 && args[1] == "on":
			w.readOnly.Store(true)
		case len(args) == 2 && args[1] == "off":
			w.readOnly.Store(false)
			w.l.EndReadOnly(errors.New("in contact with a leader again"))
		default:
			w.fatalf("usage: readonly on|off")
		}
	case "restore":
		if len(w.rep.pendingCommands()) > 0 {
			w.fatalf("restore with commands waiting in the log")
		}
		if err := w.rep.restore(); err != nil {
			w.fatalf("restore: %v", err)
		}
		w.waitEnded() // Restored ends every connection (asynchronously)
	default:
		if len(args) < 2 {
			w.fatalf("unknown command %q", line)
		}
		s := w.session(args[0])
		if s.conn == nil {
			w.fatalf("session %s has no connection", s.name)
		}
		req, what := w.request(args[1], args[2:])
		w.send(s, req, what)
	}
}

// connect creates a session, or re-attaches it with its id, password and
// the last zxid it saw.
func (w *world) connect(reattach bool, name string, opts []string) {
	req := &ConnectRequest{TimeoutMs: 10000}
	s := w.sessions[name]
	switch {
	case reattach && s == nil:
		w.fatalf("reconnect %s: no such session", name)
	case !reattach && s != nil:
		w.fatalf("connect %s: the session exists (reconnect it)", name)
	case reattach:
		req.SessionID, req.Password, req.LastZxid = s.id, s.password, s.lastZxid
	}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "timeout":
			req.TimeoutMs = int32(w.atoi(v))
		case "readonly":
			req.ReadOnly = true
		case "auth":
			id, err := fsm.ParseAuthDigest(v)
			if err != nil {
				w.fatalf("auth: %v", err)
			}
			req.Auth = append(req.Auth, id)
		default:
			w.fatalf("connect: unknown option %q", o)
		}
	}
	c, reply, err := w.l.Connect(context.Background(), req, "127.0.0.1")
	if err != nil {
		why := "?"
		for _, e := range []error{ErrUnavailable, ErrBehind, ErrSessionExpired, ErrWrongPassword} {
			if errors.Is(err, e) {
				why = e.Error()
			}
		}
		w.print("%s: refused (%s): %v", name, why, err)
		return
	}
	if s == nil {
		s = &tsession{name: name}
		w.sessions[name] = s
		w.order = append(w.order, s)
	}
	if old := s.conn; old != nil {
		// The old connection ended when the session moved to the new one
		// (whether by the attachSession's apply or by Connect is a race:
		// its end is not shown).
		w.drain(old)
		for _, line := range old.pending {
			if !strings.HasPrefix(line, "closed") {
				w.print("%s: %s", name, line)
			}
		}
		close(old.reqs)
	}
	s.id, s.password = reply.SessionID, reply.Password
	tc := &tconn{c: c, reqs: make(chan *Request, 1000), what: map[int64]string{}}
	s.conn = tc
	go func() {
		for req := range tc.reqs {
			w.l.Touch(c.ID()) // as a front end does for every packet
			c.Handle(req)
			tc.handled.Add(1)
		}
	}()
	how := "connected"
	if reattach {
		how = "re-attached"
	}
	if reply.ReadOnly {
		how += " read-only"
	}
	w.print("%s: %s, timeout %dms", name, how, reply.TimeoutMs)
}

func (w *world) send(s *tsession, req *Request, what string) {
	tc := s.conn
	tc.xid++
	req.Xid = tc.xid
	tc.sent++
	tc.kinds = append(tc.kinds, req.Kind)
	tc.what[req.Xid] = what
	tc.reqs <- req
}

// request builds a request from a script line's words.
func (w *world) request(op string, args []string) (*Request, string) {
	req := &Request{}
	path := ""
	if len(args) > 0 && strings.HasPrefix(args[0], "/") {
		path = args[0]
		args = args[1:]
	}
	req.Path = path
	flags, opts, words := w.split(args)
	switch op {
	case "create":
		req.Kind, req.Write = OpCreate, w.createOp(path, flags, opts, words)
	case "setData":
		if len(words) != 1 {
			w.fatalf("usage: setData <path> <data> [version=N]")
		}
		req.Kind, req.Write = OpSetData, fsm.Op{Type: fsm.CmdSetData, Path: path, Data: []byte(words[0]), Version: w.version(opts)}
	case "delete":
		req.Kind, req.Write = OpDelete, fsm.Op{Type: fsm.CmdDelete, Path: path, Version: w.version(opts)}
	case "setACL":
		if len(words) != 1 {
			w.fatalf("usage: setACL <path> <acl>[,<acl>] [version=N]")
		}
		req.Kind, req.Write = OpSetACL, fsm.Op{Type: fsm.CmdSetACL, Path: path, ACL: w.acl(words[0]), Version: w.version(opts)}
	case "multi":
		req.Kind = OpMulti
		for _, part := range splitOps(args) {
			if len(part) < 2 {
				w.fatalf("multi: an op needs a type and a path: %v", part)
			}
			f, o, ws := w.split(part[2:])
			switch part[0] {
			case "create":
				req.Writes = append(req.Writes, w.createOp(part[1], f, o, ws))
			case "setData":
				if len(ws) != 1 {
					w.fatalf("multi: usage: setData <path> <data> [version=N]")
				}
				req.Writes = append(req.Writes, fsm.Op{Type: fsm.CmdSetData, Path: part[1], Data: []byte(ws[0]), Version: w.version(o)})
			case "delete":
				req.Writes = append(req.Writes, fsm.Op{Type: fsm.CmdDelete, Path: part[1], Version: w.version(o)})
			case "check":
				req.Writes = append(req.Writes, fsm.Op{Type: fsm.CmdCheck, Path: part[1], Version: w.version(o)})
			default:
				w.fatalf("multi: unknown op %q", part[0])
			}
		}
	case "getData":
		req.Kind, req.Watch = OpGetData, flags["watch"]
	case "exists":
		req.Kind, req.Watch = OpExists, flags["watch"]
	case "getChildren":
		req.Kind, req.Watch = OpGetChildren, flags["watch"]
	case "getACL":
		req.Kind = OpGetACL
	case "getEphemerals":
		req.Kind = OpGetEphemerals
		if path == "" {
			req.Path = "/"
		}
	case "getAllChildrenNumber":
		req.Kind = OpGetAllChildrenNumber
	case "sync":
		req.Kind = OpSync
	case "addAuth":
		if len(words) != 2 {
			w.fatalf("usage: addAuth <scheme> <auth>")
		}
		req.Kind, req.Scheme, req.Auth = OpAuth, words[0], []byte(words[1])
		return req, "auth " + words[0]
	case "addWatch":
		req.Kind = OpAddWatch
		switch {
		case flags["persistent"]:
			req.WatchMode = vocab.AddWatchPersistent
		case flags["recursive"]:
			req.WatchMode = vocab.AddWatchPersistentRecursive
		default:
			w.fatalf("usage: addWatch <path> persistent|recursive")
		}
	case "removeWatches", "checkWatches":
		req.Kind = OpRemoveWatches
		if op == "checkWatches" {
			req.Kind = OpCheckWatches
		}
		types := map[string]vocab.WatcherType{"children": vocab.WatcherChildren, "data": vocab.WatcherData, "any": vocab.WatcherAny,
			"persistent": vocab.WatcherPersistent, "recursive": vocab.WatcherPersistentRecursive}
		if len(args) != 1 || types[args[0]] == 0 {
			w.fatalf("usage: %s <path> children|data|any|persistent|recursive", op)
		}
		req.WatcherType = types[args[0]]
	case "setWatches":
		ws := &WatchSet{RelativeZxid: int64(zxid.New(1, uint32(w.atoi(opts["zxid"]))))}
		list := func(k string) []string {
			if opts[k] == "" {
				return nil
			}
			return strings.Split(opts[k], ",")
		}
		ws.Watches = watch.WatchSet{DataWatches: list("data"), ExistWatches: list("exist"), ChildWatches: list("child"),
			PersistentWatches: list("persistent"), PersistentRecursiveWatches: list("recursive")}
		req.Kind, req.Watches = OpSetWatches, ws
	case "whoAmI":
		req.Kind = OpWhoAmI
	case "ping":
		req.Kind = OpPing
	case "close":
		req.Kind = OpClose
	default:
		w.fatalf("unknown request %q", op)
	}
	what := req.Kind.String()
	if path != "" {
		what += " " + path
	}
	return req, what
}

// split sorts a request's words: known flags, key=value options and the
// rest (a quoted word is never a flag or an option).
func (w *world) split(args []string) (flags map[string]bool, opts map[string]string, words []string) {
	flags, opts = map[string]bool{}, map[string]string{}
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, `"`):
			s, err := strconv.Unquote(a)
			if err != nil {
				w.fatalf("bad quoted word %s", a)
			}
			words = append(words, s)
		case strings.Contains(a, "="):
			k, v, _ := strings.Cut(a, "=")
			opts[k] = v
		case createModes[a] != 0 || a == "persistent" || a == "watch" || a == "recursive":
			flags[a] = true
		default:
			words = append(words, a)
		}
	}
	return flags, opts, words
}

var createModes = map[string]vocab.CreateMode{
	"ephemeral":            vocab.ModeEphemeral,
	"sequential":           vocab.ModePersistentSequential,
	"ephemeral-sequential": vocab.ModeEphemeralSequential,
	"container":            vocab.ModeContainer,
}

func (w *world) createOp(path string, flags map[string]bool, opts map[string]string, words []string) fsm.Op {
	op := fsm.Op{Type: fsm.CmdCreate, Path: path, ACL: vocab.OpenACLUnsafe}
	switch len(words) {
	case 0:
		op.Data = []byte{}
	case 1:
		op.Data = []byte(words[0])
	default:
		w.fatalf("create: more than one data word: %v", words)
	}
	for name, mode := range createModes {
		if flags[name] {
			op.Mode = mode
		}
	}
	if a, ok := opts["acl"]; ok {
		op.ACL = w.acl(a)
	}
	return op
}

func (w *world) version(opts map[string]string) int32 {
	if v, ok := opts["version"]; ok {
		return int32(w.atoi(v))
	}
	return -1
}

func (w *world) atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		w.fatalf("not a number: %q", s)
	}
	return n
}

// acl reads an ACL list: entries scheme:id:perms separated by commas, as
// ZooKeeper's command line writes them (world:anyone:r, auth::cdrwa,
// digest:user:hash:cdrwa), except that digest:user:password:perms with a
// password that is not a hash is hashed here (vocab.DigestID).
func (w *world) acl(spec string) []vocab.ACL {
	var out []vocab.ACL
	for _, e := range strings.Split(spec, ",") {
		i := strings.LastIndexByte(e, ':')
		j := strings.IndexByte(e, ':')
		if i < 0 || j == i {
			w.fatalf("bad ACL entry %q", e)
		}
		scheme, id, perms := e[:j], e[j+1:i], e[i+1:]
		if user, pw, ok := strings.Cut(id, ":"); scheme == "digest" && ok && !strings.HasSuffix(pw, "=") {
			id = vocab.DigestID(user, pw)
		}
		var p vocab.Perm
		for _, r := range perms {
			bit, ok := map[rune]vocab.Perm{'r': vocab.PermRead, 'w': vocab.PermWrite, 'c': vocab.PermCreate,
				'd': vocab.PermDelete, 'a': vocab.PermAdmin}[r]
			if !ok {
				w.fatalf("bad permission %q in %q", r, e)
			}
			p |= bit
		}
		out = append(out, vocab.ACL{Perms: p, ID: vocab.Id{Scheme: scheme, ID: id}})
	}
	return out
}

// splitOps splits a multi's words at ";".
func splitOps(args []string) [][]string {
	var out [][]string
	cur := []string{}
	for _, a := range args {
		if a == ";" {
			out = append(out, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	return append(out, cur)
}

// tokenize splits a line into words; a word in double quotes may hold
// spaces and keeps its quotes (split unquotes it).
func tokenize(line string) []string {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := 1
			for end < len(line) && (line[end] != '"' || line[end-1] == '\\') {
				end++
			}
			end = min(end+1, len(line))
			out = append(out, line[:end])
			line = line[end:]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		out = append(out, line[:end])
		line = line[end:]
	}
	return out
}

// settle waits until nothing more can happen without the script: every
// request handed to a session is answered, or waits for a command in the
// log that the script has not applied yet. Requests are handled by the
// sessions' goroutines and answered from inside apply, so this polls.
func (w *world) settle() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		all := true
		for _, s := range w.order {
			if !w.settled(s.conn) {
				all = false
			}
		}
		if all {
			// Events queued by an apply that was still running when an
			// earlier session was looked at.
			for _, s := range w.order {
				w.drain(s.conn)
			}
			return
		}
		if time.Now().After(deadline) {
			var state []string
			for _, s := range w.order {
				tc := s.conn
				state = append(state, fmt.Sprintf("%s: sent %d handled %d answered %d", s.name, tc.sent, tc.handled.Load(), tc.answered))
			}
			w.fatalf("the session layer did not settle: %s", strings.Join(state, "; "))
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// settled drains a connection and reports whether it is at rest.
func (w *world) settled(tc *tconn) bool {
	if tc == nil {
		return true
	}
	w.drain(tc)
	handled, sent, answered := int(tc.handled.Load()), tc.sent, tc.answered
	if tc.ended {
		return handled == sent
	}
	if answered == sent {
		return handled == sent && !tc.closing
	}
	// The first request not answered yet: a write waiting in the log, or
	// a sync waiting for the log to apply, holds up every later reply
	// (replies leave in request order) and every later read (which waits
	// for the session's writes).
	first := tc.kinds[answered]
	blocked := false
	switch first.Info().Run {
	case RunWrite:
		blocked = w.rep.pendingFor(tc.c.ID())
	case RunSync:
		blocked = len(w.rep.pendingCommands()) > 0
	}
	if !blocked {
		return false
	}
	// A write being handled never waits (writes pipeline): it is on its
	// way to the log.
	return handled == sent || !tc.kinds[handled].IsWrite()
}

// drain takes what the connection's outbound stream carries now, as a
// front end's writer would.
func (w *world) drain(tc *tconn) {
	if tc == nil {
		return
	}
	o := tc.c.out
	for {
		o.mu.Lock()
		n, closed := len(o.ready), o.isClosed
		o.mu.Unlock()
		if n == 0 {
			if closed && !tc.ended {
				tc.ended = true
				line := "closed"
				if err := o.closeErr(); err != nil {
					line += ": " + err.Error()
				}
				tc.pending = append(tc.pending, line)
			}
			return
		}
		msgs, _ := o.next()
		o.written()
		for _, m := range msgs {
			tc.pending = append(tc.pending, w.formatMessage(tc, m))
		}
	}
}

// flush prints what the sessions' streams carried, session by session in
// the order they connected.
func (w *world) flush() {
	for _, s := range w.order {
		if s.conn == nil {
			continue
		}
		for _, line := range s.conn.pending {
			w.print("%s: %s", s.name, line)
		}
		s.conn.pending = nil
	}
}

// waitEnded waits until every connection has ended.
func (w *world) waitEnded() {
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range w.order {
		for s.conn != nil && !s.conn.ended {
			w.drain(s.conn)
			if time.Now().After(deadline) {
				w.fatalf("%s's connection did not end", s.name)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func (w *world) formatMessage(tc *tconn, m Message) string {
	switch m := m.(type) {
	case *Event:
		if m.Type == vocab.EventNone {
			return "event " + m.State.String()
		}
		s := fmt.Sprintf("event %v %s", m.Type, m.Path)
		if m.Zxid >= 0 {
			s += " zxid=" + w.zxid(m.Zxid)
		}
		return s
	case *Reply:
		w.sawZxid(tc, m.Zxid)
		tc.answered++
		if m.Kind == OpClose && m.Err == vocab.OK {
			tc.closing = true
		}
		return fmt.Sprintf("%s -> %s zxid=%s", tc.what[m.Xid], w.formatReply(m), w.zxid(m.Zxid))
	}
	return fmt.Sprintf("%T?", m)
}

func (w *world) sawZxid(tc *tconn, z int64) {
	for _, s := range w.order {
		if s.conn == tc && z > s.lastZxid {
			s.lastZxid = z
		}
	}
}

// zxid writes a zxid as its counter: every script runs in epoch 1.
func (w *world) zxid(z int64) string {
	if zxid.Zxid(z).Epoch() != 1 && z != 0 {
		w.fatalf("zxid %#x is not of epoch 1", z)
	}
	return strconv.FormatUint(uint64(zxid.Zxid(z).Counter()), 10)
}

func (w *world) formatReply(r *Reply) string {
	s := codeName(r.Err)
	switch r.Body {
	case BodyCreate:
		s += " " + r.Path
	case BodyStat:
		if r.Err == vocab.OK {
			if r.Kind == OpSetACL {
				s += fmt.Sprintf(" aversion=%d", r.Stat.Aversion)
			} else {
				s += " " + w.stat(r.Stat)
			}
		}
	case BodyData:
		data := "null"
		if r.Data != nil {
			data = strconv.Quote(string(r.Data))
		}
		s += " " + data + " " + w.stat(r.Stat)
	case BodyChildren:
		s += " [" + strings.Join(r.Children, " ") + "]"
	case BodyPaths:
		s += " [" + strings.Join(r.Children, " ") + "]"
	case BodyACL:
		var acl []string
		for _, a := range r.ACL {
			acl = append(acl, fmt.Sprintf("%s:%s:%s", a.ID.Scheme, a.ID.ID, permString(a.Perms)))
		}
		s += fmt.Sprintf(" [%s] aversion=%d", strings.Join(acl, " "), r.Stat.Aversion)
	case BodyMulti:
		var res []string
		for _, op := range r.Multi {
			e := op.Type.String() + " " + codeName(op.Code)
			if op.Code == vocab.OK && op.Path != "" {
				e += " " + op.Path
			}
			res = append(res, e)
		}
		s += " [" + strings.Join(res, ", ") + "]"
	case BodySync:
		s += " " + r.Path
	case BodyCount:
		s += fmt.Sprintf(" %d", r.Count)
	case BodyWhoAmI:
		var ids []string
		for _, c := range r.Clients {
			ids = append(ids, c.Scheme+":"+c.User)
		}
		s += " [" + strings.Join(ids, " ") + "]"
	}
	return s
}

func (w *world) stat(st vocab.Stat) string {
	s := fmt.Sprintf("version=%d", st.Version)
	if st.EphemeralOwner != 0 {
		s += " owner=" + w.names(fmt.Sprintf("%#x", st.EphemeralOwner))
	}
	return s
}

func (w *world) describeCommand(cmd *fsm.Command) string {
	who := w.names(fmt.Sprintf("%#x", cmd.Session))
	switch cmd.Type {
	case fsm.CmdMulti, fsm.CmdCloseSession:
		return fmt.Sprintf("%v (%s)", cmd.Type, who)
	}
	return fmt.Sprintf("%v %s (%s)", cmd.Type, cmd.Op.Path, who)
}

// codeName is a code as ZooKeeper's KeeperException.Code names it.
func codeName(c vocab.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return c.String()
}

var codeNames = map[vocab.Code]string{
	vocab.OK: "OK", vocab.SystemError: "SystemError", vocab.RuntimeInconsistency: "RuntimeInconsistency",
	vocab.ConnectionLoss: "ConnectionLoss", vocab.MarshallingError: "MarshallingError",
	vocab.Unimplemented: "Unimplemented", vocab.BadArguments: "BadArguments", vocab.NoNode: "NoNode",
	vocab.NoAuth: "NoAuth", vocab.BadVersion: "BadVersion", vocab.NoChildrenForEphemerals: "NoChildrenForEphemerals",
	vocab.NodeExists: "NodeExists", vocab.NotEmpty: "NotEmpty", vocab.SessionExpired: "SessionExpired",
	vocab.InvalidACL: "InvalidACL", vocab.AuthFailed: "AuthFailed", vocab.SessionMoved: "SessionMoved",
	vocab.NotReadOnly: "NotReadOnly", vocab.NoWatcher: "NoWatcher", vocab.QuotaExceeded: "QuotaExceeded",
	vocab.ReconfigDisabled: "ReconfigDisabled",
}
