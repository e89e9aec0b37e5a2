package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// DiffConfig configures a differential run: one seeded stream of ZooKeeper
// operations applied step by step to a coord cluster and to Apache
// ZooKeeper, every result and every watch event compared.
type DiffConfig struct {
	Seed int64
	// Ops is the number of steps (default 1000).
	Ops int
	// Sessions is the number of client sessions on each side (default 3).
	// On coord, session i talks to server i mod Voters only.
	Sessions int
	// Voters is the size of the coord cluster (default 3).
	Voters int
	// Bin is a prebuilt coord binary; empty builds ./cmd/coord.
	Bin string
	// ZooKeeper is the address of a running ZooKeeper to compare with, which
	// must hold nothing but /zookeeper; empty starts a standalone one from
	// Debian's package.
	ZooKeeper string
	// Dir gets a subdirectory per run with the report.
	Dir string
	// OpTimeout bounds each operation (default 10 s); a side that does not
	// answer in time ends the run with an error.
	OpTimeout time.Duration
	// MaxMismatches ends the run early once this many are found (default
	// 10): after the first one the two trees may differ and later
	// mismatches are mostly its echo.
	MaxMismatches int
	Log           *slog.Logger

	// plant, in tests, alters coord's rendered result of a step, to show
	// the comparison can fail.
	plant func(step int, res *diffResult)
}

// DiffReport is the outcome of a differential run.
type DiffReport struct {
	Dir        string         `json:"dir"`
	Seed       int64          `json:"seed"`
	Steps      int            `json:"steps"`
	Kinds      map[string]int `json:"kinds"`  // steps per operation kind
	Errors     map[string]int `json:"errors"` // error results both sides gave, by error
	Events     int            `json:"events"` // watch events both sides delivered
	Mismatches []Mismatch     `json:"mismatches"`
}

// Mismatch is a step where coord and ZooKeeper answered differently.
type Mismatch struct {
	Step      int    `json:"step"`
	Op        string `json:"op"`
	Coord     string `json:"coord"`
	ZooKeeper string `json:"zookeeper"`
}

func (c *DiffConfig) defaults() {
	if c.Ops <= 0 {
		c.Ops = 1000
	}
	if c.Sessions <= 0 {
		c.Sessions = 3
	}
	if c.Voters <= 0 {
		c.Voters = 3
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.MaxMismatches <= 0 {
		c.MaxMismatches = 10
	}
	if c.Dir == "" {
		c.Dir = "jepsen-results"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// Differential runs the seeded operation stream against a fresh coord
// cluster and ZooKeeper and compares every result and event. It returns an
// error only when the run could not be made; differences are Mismatches.
func Differential(ctx context.Context, cfg DiffConfig) (*DiffReport, error) {
	cfg.defaults()
	dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-diff-seed%d", time.Now().Format("20060102-150405"), cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &DiffReport{Dir: dir, Seed: cfg.Seed, Kinds: map[string]int{}, Errors: map[string]int{}}

	zkAddr := cfg.ZooKeeper
	if zkAddr == "" {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		z, err := StartZooKeeper(sctx, dir)
		cancel()
		if err != nil {
			return nil, err
		}
		defer z.Close()
		zkAddr = z.Servers[0].Addr
	}
	bin := cfg.Bin
	if bin == "" {
		var err error
		if bin, err = BuildCoord(ctx, dir); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	// No container or TTL node is reaped during the run on either side:
	// when that happens is not part of the stream.
	cl, err := StartCluster(sctx, ClusterConfig{Bin: bin, Dir: dir, Voters: cfg.Voters, Log: cfg.Log,
		Args: []string{"-container-check-interval", "24h"}})
	cancel()
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	env := &Env{OpTimeout: cfg.OpTimeout, SessionTimeout: 10 * time.Second, Log: cfg.Log}
	sides := []*diffSide{newDiffSide("coord", cl.Addrs(), env), newDiffSide("zookeeper", []string{zkAddr}, env)}
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for _, s := range sides {
		for i := 0; i < cfg.Sessions; i++ {
			if err := s.open(ctx, i); err != nil {
				return nil, fmt.Errorf("%s: session %d: %w", s.name, i, err)
			}
		}
	}

	steps, err := os.Create(filepath.Join(dir, "diff.jsonl"))
	if err != nil {
		return nil, err
	}
	defer steps.Close()
	enc := json.NewEncoder(steps)
	gen := newDiffGen(cfg.Seed, cfg.Sessions)
	cfg.Log.Info("differential run", "seed", cfg.Seed, "ops", cfg.Ops, "coord", cl.Addrs(), "zookeeper", zkAddr, "dir", dir)
	for step := 0; step < cfg.Ops && ctx.Err() == nil && len(rep.Mismatches) < cfg.MaxMismatches; step++ {
		op := gen.next()
		var res [2]diffResult
		for k, s := range sides {
			r, err := s.do(ctx, op)
			if err != nil {
				return rep, fmt.Errorf("step %d (%s) on %s: %w", step, op, s.name, err)
			}
			if err := s.barrier(ctx); err != nil {
				return rep, fmt.Errorf("step %d (%s) on %s: %w", step, op, s.name, err)
			}
			r.Events = s.drainEvents()
			res[k] = r
		}
		if cfg.plant != nil {
			cfg.plant(step, &res[0])
		}
		gen.learn(op, res[0])
		rep.Steps++
		rep.Kinds[op.kind]++
		a, b := res[0].String(), res[1].String()
		enc.Encode(map[string]any{"step": step, "op": op.String(), "coord": a, "zookeeper": b})
		if a != b {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Step: step, Op: op.String(), Coord: a, ZooKeeper: b})
			continue
		}
		if res[0].Err != "" {
			rep.Errors[res[0].Err]++
		}
		for _, m := range res[0].Multi {
			if strings.HasPrefix(m, "err ") {
				rep.Errors[strings.TrimPrefix(m, "err ")]++
			}
		}
		rep.Events += len(res[0].Events)
	}
	if ctx.Err() == nil && len(rep.Mismatches) < cfg.MaxMismatches {
		// The whole tree at the end, read from a fresh session.
		var trees [2]string
		for k, s := range sides {
			t, err := s.dumpTree(ctx)
			if err != nil {
				return rep, fmt.Errorf("reading %s's tree: %w", s.name, err)
			}
			trees[k] = t
		}
		if trees[0] != trees[1] {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Step: rep.Steps, Op: "final tree", Coord: trees[0], ZooKeeper: trees[1]})
		}
	}
	return rep, writeJSON(filepath.Join(dir, "diff.json"), rep)
}

// diffOp is one generated step.
type diffOp struct {
	kind    string
	session int
	path    string
	data    []byte
	flags   int32
	version int32
	acl     int
	ttl     time.Duration // of a TTL create
	watch   bool
	multi   []diffOp
}

func (o diffOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s%d %s", o.session, o.kind)
	if o.path != "" {
		fmt.Fprintf(&b, " %s", o.path)
	}
	switch o.kind {
	case "create":
		fmt.Fprintf(&b, " flags=%d acl=%s data=%q", o.flags, diffACLNames[o.acl], o.data)
		if o.flags == zk.FlagTTL || o.flags == zk.FlagPersistentSequentialWithTTL {
			fmt.Fprintf(&b, " ttl=%v", o.ttl)
		}
	case "set":
		fmt.Fprintf(&b, " v=%d data=%q", o.version, o.data)
	case "delete", "check":
		fmt.Fprintf(&b, " v=%d", o.version)
	case "setacl":
		fmt.Fprintf(&b, " v=%d acl=%s", o.version, diffACLNames[o.acl])
	case "get", "exists", "children":
		if o.watch {
			b.WriteString(" watch")
		}
	case "multi":
		var parts []string
		for _, m := range o.multi {
			parts = append(parts, strings.TrimPrefix(m.String(), fmt.Sprintf("s%d ", o.session)))
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, "; "))
	}
	return b.String()
}

// diffACLs is the pool of ACLs the stream sets. Session 0 of each side is
// logged in as alice, the others are anonymous.
var (
	diffACLNames = []string{"world:all", "world:read", "digest-alice:all", "world:read+alice:all", "auth:all",
		"world:create,read,delete", "ip-127.0.0.1:all"}
	diffACLs = [][]zk.ACL{
		zk.WorldACL(zk.PermAll),
		zk.WorldACL(zk.PermRead),
		zk.DigestACL(zk.PermAll, "alice", "secret"),
		append(zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "alice", "secret")...),
		zk.AuthACL(zk.PermAll),
		zk.WorldACL(zk.PermCreate | zk.PermRead | zk.PermDelete),
		{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"}},
	}
)

// diffGen draws the operation stream. It depends only on the seed and on
// the names coord's sequential creates returned (which ZooKeeper must
// match, or the step is a mismatch already).
type diffGen struct {
	r        *rand.Rand
	sessions int
	seq      []string // sequential names created, newest last
	n        int
}

func newDiffGen(seed int64, sessions int) *diffGen {
	return &diffGen{r: rand.New(rand.NewSource(seed)), sessions: sessions}
}

var diffBasePaths = []string{"/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/1", "/a/y/2", "/c"}

func (g *diffGen) path() string {
	if len(g.seq) > 0 && g.r.Intn(4) == 0 {
		return g.seq[g.r.Intn(len(g.seq))]
	}
	return diffBasePaths[g.r.Intn(len(diffBasePaths))]
}

func (g *diffGen) data() []byte {
	g.n++
	switch g.r.Intn(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return []byte(strings.Repeat("d", 100+g.r.Intn(400)))
	}
	return []byte(fmt.Sprintf("v%d", g.n))
}

func (g *diffGen) version() int32 {
	if g.r.Intn(3) == 0 {
		return -1
	}
	return int32(g.r.Intn(4))
}

func (g *diffGen) acl() int {
	if g.r.Intn(3) > 0 {
		return 0 // mostly open, so the tree keeps changing
	}
	return g.r.Intn(len(diffACLs))
}

func (g *diffGen) write(kind string) diffOp {
	op := diffOp{kind: kind, path: g.path()}
	switch kind {
	case "create":
		op.data, op.acl = g.data(), g.acl()
		op.flags = []int32{0, 0, 0, zk.FlagEphemeral, zk.FlagSequence, zk.FlagEphemeral | zk.FlagSequence,
			zk.FlagContainer, zk.FlagTTL, zk.FlagPersistentSequentialWithTTL}[g.r.Intn(9)]
		switch op.flags {
		case zk.FlagSequence, zk.FlagEphemeral | zk.FlagSequence, zk.FlagPersistentSequentialWithTTL:
			op.path += "/q-"
		}
		if op.flags == zk.FlagTTL || op.flags == zk.FlagPersistentSequentialWithTTL {
			op.ttl = []time.Duration{0, time.Second, time.Hour}[g.r.Intn(3)]
		}
	case "set":
		op.data, op.version = g.data(), g.version()
	case "delete", "check":
		op.version = g.version()
	}
	return op
}

func (g *diffGen) next() diffOp {
	s := g.r.Intn(g.sessions)
	var op diffOp
	switch w := g.r.Intn(100); {
	case w < 26:
		op = g.write("create")
	case w < 38:
		op = g.write("delete")
	case w < 52:
		op = g.write("set")
	case w < 78:
		op = diffOp{kind: []string{"get", "exists", "children"}[g.r.Intn(3)], path: g.path(), watch: g.r.Intn(2) == 0}
		if g.r.Intn(10) == 0 {
			op.path = "/"
		}
	case w < 82:
		op = diffOp{kind: "getacl", path: g.path()}
	case w < 87:
		op = diffOp{kind: "setacl", path: g.path(), version: g.version(), acl: g.acl()}
	case w < 97:
		op = diffOp{kind: "multi"}
		for i, n := 0, 1+g.r.Intn(4); i < n; i++ {
			op.multi = append(op.multi, g.write([]string{"create", "create", "set", "delete", "check"}[g.r.Intn(5)]))
		}
	default:
		op = diffOp{kind: "reconnect"}
	}
	op.session = s
	return op
}

// learn adds the names coord's sequential creates returned to the pool.
func (g *diffGen) learn(op diffOp, res diffResult) {
	add := func(p string) {
		if p != "" {
			g.seq = append(g.seq, p)
			if len(g.seq) > 30 {
				g.seq = g.seq[1:]
			}
		}
	}
	if op.kind == "create" && strings.HasSuffix(op.path, "/q-") && res.Err == "" {
		add(res.Path)
	}
	for i, m := range op.multi {
		if m.kind == "create" && strings.HasSuffix(m.path, "/q-") && i < len(res.Multi) && strings.HasPrefix(res.Multi[i], "path ") {
			add(strings.TrimPrefix(res.Multi[i], "path "))
		}
	}
}

// diffResult is a step's outcome on one side, rendered with zxids and
// session ids replaced by labels both sides share.
type diffResult struct {
	Err      string
	Path     string
	Data     string
	Stat     string
	Children []string
	ACL      string
	Multi    []string
	Events   []string
}

func (r diffResult) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("err", r.Err)
	add("path", r.Path)
	add("data", r.Data)
	add("stat", r.Stat)
	if r.Children != nil {
		add("children", "["+strings.Join(r.Children, ",")+"]")
	}
	add("acl", r.ACL)
	if r.Multi != nil {
		add("multi", "["+strings.Join(r.Multi, "; ")+"]")
	}
	if len(r.Events) > 0 {
		add("events", "["+strings.Join(r.Events, "; ")+"]")
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, " ")
}

// diffSide is one system under comparison with its sessions.
type diffSide struct {
	name     string
	addrs    []string
	env      *Env
	sessions []*diffSession
	gen      []int

	// zxids seen, labelled in order of first sight; a new zxid's label
	// records where it sorts among those seen before, so two sides agree
	// only if their zxids are ordered alike.
	zxLabel map[int64]int
	zxSeen  []int64
	owners  map[int64]string
}

type diffSession struct {
	conn    *zk.Conn
	label   string
	watches []diffWatch
}

type diffWatch struct {
	kind string
	ch   <-chan zk.Event
}

func newDiffSide(name string, addrs []string, env *Env) *diffSide {
	return &diffSide{name: name, addrs: addrs, env: env, zxLabel: map[int64]int{}, owners: map[int64]string{}}
}

// open starts session i (again): on coord on server i mod n only.
func (s *diffSide) open(ctx context.Context, i int) error {
	for len(s.sessions) <= i {
		s.sessions = append(s.sessions, nil)
		s.gen = append(s.gen, 0)
	}
	conn, err := s.env.dial(ctx, []string{s.addrs[i%len(s.addrs)]}, nil)
	if err != nil {
		return err
	}
	s.gen[i]++
	label := fmt.Sprintf("s%d.%d", i, s.gen[i])
	s.owners[conn.SessionID()] = label
	s.sessions[i] = &diffSession{conn: conn, label: label}
	if i == 0 {
		if err := s.env.call(ctx, conn, func(conn *zk.Conn) error { return conn.AddAuth("digest", []byte("alice:secret")) }); err != nil {
			return fmt.Errorf("addAuth: %w", err)
		}
	}
	return nil
}

func (s *diffSide) close() {
	for _, ss := range s.sessions {
		if ss != nil {
			ss.conn.Close()
		}
	}
}

func (s *diffSide) zxid(z int64) string {
	if z == 0 {
		return "0"
	}
	if l, ok := s.zxLabel[z]; ok {
		return fmt.Sprintf("z%d", l)
	}
	pos := sort.Search(len(s.zxSeen), func(i int) bool { return s.zxSeen[i] > z })
	s.zxSeen = append(s.zxSeen, 0)
	copy(s.zxSeen[pos+1:], s.zxSeen[pos:])
	s.zxSeen[pos] = z
	l := len(s.zxLabel) + 1
	s.zxLabel[z] = l
	return fmt.Sprintf("z%d(new,rank %d)", l, pos)
}

func (s *diffSide) stat(st *zk.Stat) string {
	if st == nil {
		return ""
	}
	owner := "-"
	if st.EphemeralOwner != 0 {
		if l, ok := s.owners[st.EphemeralOwner]; ok {
			owner = l
		} else {
			owner = fmt.Sprintf("unknown:%#x", st.EphemeralOwner)
		}
	}
	return fmt.Sprintf("{czxid:%s mzxid:%s pzxid:%s v:%d cv:%d av:%d owner:%s len:%d kids:%d ctime=mtime:%v}",
		s.zxid(st.Czxid), s.zxid(st.Mzxid), s.zxid(st.Pzxid), st.Version, st.Cversion, st.Aversion,
		owner, st.DataLength, st.NumChildren, st.Ctime == st.Mtime)
}

func aclString(acl []zk.ACL) string {
	var parts []string
	for _, a := range acl {
		parts = append(parts, fmt.Sprintf("%s:%s:%d", a.Scheme, a.ID, a.Perms))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// errStepTimeout is a side not answering a step within the op timeout.
var errStepTimeout = errors.New("no answer within the op timeout")

// do runs op on its session. A definite ZooKeeper error is a result; only
// a side that does not answer (or loses its connection) is an error.
func (s *diffSide) do(ctx context.Context, op diffOp) (diffResult, error) {
	var res diffResult
	ss := s.sessions[op.session]
	c := ss.conn
	if op.kind == "reconnect" {
		c.Close()
		return res, s.open(ctx, op.session)
	}
	err := s.env.call(ctx, c, func(c *zk.Conn) error {
		var err error
		switch op.kind {
		case "create":
			switch op.flags {
			case zk.FlagContainer:
				res.Path, err = c.CreateContainer(op.path, op.data, op.flags, diffACLs[op.acl])
			case zk.FlagTTL, zk.FlagPersistentSequentialWithTTL:
				res.Path, err = c.CreateTTL(op.path, op.data, op.flags, diffACLs[op.acl], op.ttl)
			default:
				res.Path, err = c.Create(op.path, op.data, op.flags, diffACLs[op.acl])
			}
		case "delete":
			err = c.Delete(op.path, op.version)
		case "set":
			var st *zk.Stat
			st, err = c.Set(op.path, op.data, op.version)
			res.Stat = s.stat(st)
		case "get":
			var (
				data []byte
				st   *zk.Stat
				ch   <-chan zk.Event
			)
			if op.watch {
				data, st, ch, err = c.GetW(op.path)
			} else {
				data, st, err = c.Get(op.path)
			}
			if err == nil {
				res.Data, res.Stat = fmt.Sprintf("%q", data), s.stat(st)
			}
			if ch != nil {
				ss.watches = append(ss.watches, diffWatch{"data " + op.path, ch})
			}
		case "exists":
			var (
				ok bool
				st *zk.Stat
				ch <-chan zk.Event
			)
			if op.watch {
				ok, st, ch, err = c.ExistsW(op.path)
			} else {
				ok, st, err = c.Exists(op.path)
			}
			if err == nil {
				res.Data = fmt.Sprint("exists:", ok)
				if ok {
					res.Stat = s.stat(st)
				}
			}
			if ch != nil {
				ss.watches = append(ss.watches, diffWatch{"exists " + op.path, ch})
			}
		case "children":
			var (
				kids []string
				st   *zk.Stat
				ch   <-chan zk.Event
			)
			if op.watch {
				kids, st, ch, err = c.ChildrenW(op.path)
			} else {
				kids, st, err = c.Children(op.path)
			}
			if err == nil {
				sort.Strings(kids) // ZooKeeper's order is a hash set's
				res.Children, res.Stat = append([]string{}, kids...), s.stat(st)
			}
			if ch != nil {
				ss.watches = append(ss.watches, diffWatch{"children " + op.path, ch})
			}
		case "getacl":
			var (
				acl []zk.ACL
				st  *zk.Stat
			)
			acl, st, err = c.GetACL(op.path)
			if err == nil {
				res.ACL, res.Stat = aclString(acl), s.stat(st)
			}
		case "setacl":
			var st *zk.Stat
			st, err = c.SetACL(op.path, diffACLs[op.acl], op.version)
			res.Stat = s.stat(st)
		case "multi":
			var reqs []any
			for _, m := range op.multi {
				switch m.kind {
				case "create":
					reqs = append(reqs, &zk.CreateRequest{Path: m.path, Data: m.data, Acl: diffACLs[m.acl], Flags: m.flags})
				case "set":
					reqs = append(reqs, &zk.SetDataRequest{Path: m.path, Data: m.data, Version: m.version})
				case "delete":
					reqs = append(reqs, &zk.DeleteRequest{Path: m.path, Version: m.version})
				case "check":
					reqs = append(reqs, &zk.CheckVersionRequest{Path: m.path, Version: m.version})
				}
			}
			var out []zk.MultiResponse
			out, err = c.Multi(reqs...)
			res.Multi = []string{}
			for _, r := range out {
				switch {
				case r.Error != nil:
					res.Multi = append(res.Multi, "err "+r.Error.Error())
				case r.String != "":
					res.Multi = append(res.Multi, "path "+r.String)
				case r.Stat != nil:
					res.Multi = append(res.Multi, "stat "+s.stat(r.Stat))
				default:
					res.Multi = append(res.Multi, "ok")
				}
			}
		default:
			return fmt.Errorf("unknown op %q", op.kind)
		}
		return err
	})
	switch {
	case errors.Is(err, errTimeout):
		// The call may still be running and writing res: hand back none of it.
		return diffResult{}, errStepTimeout
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
		return res, err
	}
	res.Err = errText(err)
	return res, nil
}

// barrier makes sure every session has seen the events of the step: a
// sync and then a read on each session, whose reply comes after every
// event the server sent the session before it.
func (s *diffSide) barrier(ctx context.Context) error {
	for _, ss := range s.sessions {
		c := ss.conn
		if err := s.env.call(ctx, c, func(c *zk.Conn) error {
			if _, err := c.Sync("/"); err != nil {
				return err
			}
			_, _, err := c.Exists("/")
			return err
		}); err != nil {
			return fmt.Errorf("barrier on %s: %w", ss.label, err)
		}
	}
	return nil
}

// drainEvents takes the watch events that fired, per session sorted (a
// one-shot watch has its own channel in go-zookeeper, so the order across
// watches of one session is not observable here; across steps it is).
func (s *diffSide) drainEvents() []string {
	var out []string
	for i, ss := range s.sessions {
		var fired []string
		kept := ss.watches[:0]
		for _, w := range ss.watches {
			select {
			case ev := <-w.ch:
				fired = append(fired, fmt.Sprintf("s%d %s: %s %s", i, w.kind, ev.Type, ev.Path))
			default:
				kept = append(kept, w)
			}
		}
		ss.watches = kept
		sort.Strings(fired)
		out = append(out, fired...)
	}
	return out
}

// dumpTree reads the whole tree (data, Stat, ACL, children) from session
// 0, which holds alice's identity, skipping /zookeeper.
func (s *diffSide) dumpTree(ctx context.Context) (string, error) {
	c := s.sessions[0].conn
	var b strings.Builder
	var walk func(p string) error
	walk = func(p string) error {
		var (
			data []byte
			st   *zk.Stat
			acl  []zk.ACL
			kids []string
		)
		err := s.env.call(ctx, c, func(c *zk.Conn) error {
			var err error
			if data, st, err = c.Get(p); err != nil && !errors.Is(err, zk.ErrNoAuth) {
				return err
			}
			if acl, _, err = c.GetACL(p); err != nil && !errors.Is(err, zk.ErrNoAuth) {
				return err
			}
			kids, _, err = c.Children(p)
			if errors.Is(err, zk.ErrNoAuth) {
				err = nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		fmt.Fprintf(&b, "%s %q %s %s\n", p, data, s.stat(st), aclString(acl))
		sort.Strings(kids)
		for _, k := range kids {
			child := strings.TrimSuffix(p, "/") + "/" + k
			if child == "/zookeeper" {
				continue
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk("/")
	return b.String(), err
}
