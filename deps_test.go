package coord_test

// The layering of docs/architecture.md ("Who may import whom") as a test.
//
// Every directory of Go files is its own entry: a subpackage is checked
// against its own row, never folded into its parent's, and a directory with
// no row fails, so a new package must be added here (and to the diagram, or
// to the off-diagram rows) before it builds into the tree. The go tool's own
// rules decide what is a package of this module: directories named testdata,
// or starting with "." or "_", and nested modules are skipped.
//
// What is checked, file by file (build tags are ignored: every .go file
// counts):
//   - layering: a non-test file imports only the coord packages of its row;
//     a _test.go file (internal or external test package) also those of
//     testExtras and, in a test-only package, those of its tests row; any file
//     may import its own package. An edge listed in knownDeviations is logged,
//     not failed; any other edge fails.
//   - unknown-package, test-only: a directory without a row; a non-test file
//     with imports or declarations in a package meant to hold tests only (a
//     doc.go with just the package comment is fine).
//   - pure-import, pure-clock, pure-go: the non-test files of the pure
//     packages import no logging, randomness, networking, OS or raft-stack
//     package, do not read the clock (time.Now, time.Since, timers, ...) and
//     start no goroutine. Their test files are free of these rules (tests may
//     use rand, time and goroutines); they still follow the layering.

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// drawing is the diagram under "Who may import whom" in docs/architecture.md,
// copied verbatim. TestDiagramMatchesDocs fails when the two differ: change
// the docs, this copy and drawn below in one change.
const drawing = `cmd/coord  cmd/coordctl        jepsen/     (cmd/coordctl also reaches server/replica: snapshot restore, offline)
     \          |             /           (jepsen/ also reaches internal/netlab and internal/zkproc, leaves: network namespaces, ZooKeeper processes)
      \         |    recipes/coordconn  recipes/zkconn   (adapters: recipes.Conn on coord's client, on go-zookeeper)
       \        |     /      \         /
      server/  client/        recipes/   (recipes: only its own small Conn interface)
      |       \   |             |
server/zkfront \  |             |    (the ZooKeeper front end: its port, connections, jute onto the session layer, four-letter words)
server/reconfig \ |             |    (one row with server/zkfront, neither under the other: ZooKeeper's reconfig and /zookeeper/config)
server/console   \|             |    (the same row: the browser console under /ui/, a client of the session layer like the front ends)
      |  \        |             |
      |   \      api/ ----------+    (protobuf + generated gRPC; its one mapping to vocab/ types)
      |    \---- zk/ -----------+    (ZooKeeper wire protocol; no state)
   server/sessions              |    (the session layer: connections, request path, watch delivery, expiry)
      |      \                  |
   server/replica \             |    (the raft member: log, proposer, forwarder, apply; no connections)
      |   \    \   \            |
      |  api/  server/internal/logbridge (leaf: raft's and memberlist's logs through slog)
   session/       watch/        |
        \         /             |
         fsm/ ------------------+
           |                    |
         zxid/ (leaf)         vocab/ (leaf: codes and errors, Stat, ACLs, create modes, events, states)`

// drawn is the drawing as edges: per package it shows, the packages its lines
// reach one level down. How the picture is read:
//   - cmd/coord's "\" reaches server/, cmd/coordctl's "|" client/ (and, as
//     its note says, server/replica) and
//     jepsen/'s "/" the row of the two recipe adapters (and, as its note
//     says, internal/netlab and internal/zkproc);
//   - recipes/coordconn's "/" reaches client/ and its "\" recipes/;
//     recipes/zkconn's "/" reaches recipes/ only;
//   - server/'s "\" reaches the api/ zk/ column and its "|" the row of
//     server/zkfront, server/reconfig and server/console (three labels
//     stacked as one row: none reaches another), and through them
//     server/sessions;
//   - that row's "|" reaches server/sessions and its "\" zk/ only (not
//     api/, except through the session layer and the replica): the front
//     end is a codec between jute and the session layer, reconfig turns
//     ZooKeeper's reconfig into membership changes and keeps
//     /zookeeper/config; neither imports server/;
//   - server/sessions' "|" reaches server/replica and its long "\" watch/ (no
//     other line enters watch/, the server-local registry);
//   - server/replica's "|" reaches session/ (and through it fsm/), its first
//     "\" api/ only (not zk/), its second server/internal/logbridge, a leaf;
//   - client/'s "|" reaches the api/ zk/ column;
//   - the line on the right is vocab/'s: recipes/'s "|", api/'s, zk/'s and
//     fsm/'s "---" join it, and it leads down to vocab/ only (a join is no
//     way across: recipes/ does not reach zk/ or fsm/ through it);
//   - session/ and watch/ reach fsm/, fsm/ reaches zxid/ and vocab/.
//
// So every drawn package may import vocab/: client/ through zk/, server/,
// session/ and watch/ through fsm/ (and zk/), the commands and jepsen/
// through the package they reach.
//
// A package may import what its lines reach and whatever those reach in turn
// ("nothing low imports anything high"): allowed is the transitive closure.
var drawn = map[string][]string{
	"cmd/coord":                 {"server"},
	"cmd/coordctl":              {"client", "server/replica"},
	"jepsen":                    {"recipes/coordconn", "recipes/zkconn", "internal/netlab", "internal/zkproc"},
	"recipes/coordconn":         {"client", "recipes"},
	"recipes/zkconn":            {"recipes"},
	"server":                    {"api", "zk", "server/zkfront", "server/reconfig", "server/console"},
	"server/console":            {"server/sessions"},
	"server/zkfront":            {"server/sessions", "zk"},
	"server/reconfig":           {"server/sessions", "zk"},
	"server/sessions":           {"server/replica", "watch"},
	"server/replica":            {"api", "session", "server/internal/logbridge"},
	"server/internal/logbridge": {},
	"internal/netlab":           {},
	"internal/zkproc":           {},
	"client":                    {"api", "zk"},
	"recipes":                   {"vocab"},
	"api":                       {"vocab"},
	"zk":                        {"vocab"},
	"session":                   {"fsm"},
	"watch":                     {"fsm"},
	"fsm":                       {"zxid", "vocab"},
	"zxid":                      {},
	"vocab":                     {},
}

// row is what one package may import from this module.
type row struct {
	imports  []string // coord packages its non-test files may import
	tests    []string // more coord packages its _test.go files may import
	testOnly bool     // it holds only _test.go files
}

// offDiagram are the packages the drawing does not show: tools and test-only
// packages. Their rows are written out here and are their only rule. Like
// every drawn package, each may import the leaf vocab.
var offDiagram = map[string]row{
	".":              {testOnly: true}, // this file
	"cmd/coordbench": {imports: []string{"client", "api", "zk", "vocab", "zxid", "internal/fourletter"}},
	"cmd/watchmem":   {imports: []string{"vocab", "internal/zkproc", "internal/fourletter", "internal/freeport"}},
	"deploy":         {testOnly: true, tests: []string{"internal/composenet"}}, // the docker-compose tests (Dockerfile, docker-compose.yml)
	// the attack suite: real coord processes tried as a stranger on every port (docs/security.md)
	"internal/attack": {testOnly: true, tests: []string{"server", "server/replica", "api", "client", "vocab", "internal/testpki", "internal/fourletter"}},
	// the console's browser tests: Chromium driven with chromedp against `coord local` (docs/console.md)
	"internal/consoleui": {testOnly: true, tests: []string{"internal/testpki", "internal/freeport"}},
	// the pages' command blocks run as scripts against coord processes (README.md, docs/)
	"internal/doctest": {testOnly: true},
	// an in-memory network of named hosts: whole clusters in one process, no TCP between servers (issue 29)
	"internal/memnet": {},
	// a whole cluster in one process on memnet and in-memory raft stores, for other packages' tests
	"internal/testcluster": {imports: []string{"server", "internal/memnet", "internal/servergroup"}, tests: []string{"client", "vocab"}},
	// the part of an in-process test cluster that does not depend on the server's type (starts, restarts, waits):
	// internal/testcluster's and server's own tests' clusters are built on it
	"internal/servergroup": {},
	// test-only leaves, imported by tests only (testExtras, tests rows), so
	// no test code ships in the product (issue 29): a throwaway CA and its
	// certificates, and the watchdog a package's TestMain runs its tests
	// under. Leaves, so server's own tests may import them too.
	"internal/testpki":  {},
	"internal/watchdog": {},
	// leaves too slight to draw (see helpers): the one client of ZooKeeper's
	// four-letter words, and loopback ports free for servers to start on
	"internal/fourletter": {},
	"internal/freeport":   {},
	// a free Docker subnet and host port prefix for a compose project (deploy's and jepsen's compose tests)
	"internal/composenet": {},
	// a FUSE filesystem that forgets what was not fsynced (power loss, torn writes, fsync errors) for jepsen/'s disk faults
	"jepsen/forgetfs": {tests: []string{"internal/freeport"}},
	// the runner of jepsen/'s harness (a command of the drawn jepsen/)
	"jepsen/cmd/jepsen": {imports: []string{"jepsen"}},
	"zk/compat": {testOnly: true, tests: []string{"server", "vocab", "internal/netlab", "internal/fourletter", "internal/freeport",
		"internal/testcluster", "internal/testpki", "internal/watchdog"}}, // compatibility tests against a real server
}

// helpers are off-diagram leaves (rows that import no coord package) the
// non-test files of a drawn package may import on top of what its lines
// reach: small tools too slight to draw. Being leaves, they add no path
// between drawn packages.
var helpers = map[string][]string{
	"cmd/coordctl":    {"internal/fourletter"},                      // its 4lw command
	"internal/zkproc": {"internal/fourletter", "internal/freeport"}, // a ZooKeeper's ports, and its srvr
	"jepsen":          {"internal/freeport", "jepsen/forgetfs"},     // its servers' ports; the power nemeses' filesystem
}

// testExtras are coord packages the _test.go files of a drawn package may
// import on top of its row.
var testExtras = map[string][]string{
	// its tests run against an in-process cluster (server.Config to tweak it).
	"client": {"server", "internal/testcluster", "internal/testpki", "internal/watchdog"},
	// its certificate recipe's test (docs/testdata/certs.sh) connects the Go
	// client to a coord process with the certificates it made; its health
	// and start-log tests run an in-process server.
	"cmd/coord": {"client", "internal/freeport", "internal/testcluster", "internal/testpki"},
	// coordctl's TLS test takes its certificates from internal/testpki.
	"cmd/coordctl": {"server", "internal/zkproc", "internal/freeport", "internal/testpki"},
	// its tests ask servers four-letter words and start servers on free
	// ports; its cluster helper (testcluster_test.go) uses the test-only
	// leaves.
	"server": {"internal/fourletter", "internal/freeport", "internal/testpki", "internal/watchdog", "internal/memnet", "internal/servergroup"},
	// recipes' tests run each recipe through both adapters, on an in-process
	// coord cluster and on Apache ZooKeeper.
	// its compose test picks its project's subnet and ports.
	"jepsen":  {"internal/composenet"},
	"recipes": {"server", "client", "recipes/coordconn", "recipes/zkconn", "internal/zkproc", "internal/testcluster", "internal/watchdog"},
}

type edge struct{ from, to string }

// knownDeviations: edges today's code has that the drawing does not draw.
// To remove, each by changing the code or the drawing (and then this list).
// The test logs every file that uses one, fails on any edge neither allowed
// nor listed here, and fails on an entry that no longer occurs.
//
// None today: client -> fsm and zk -> fsm went when the shared vocabulary
// moved from fsm into the leaf vocab.
var knownDeviations = []edge{}

// raftOwner is the one package whose non-test files may import
// hashicorp/raft and its stores: the replica owns raft and the peer plane.
const raftOwner = "server/replica"

// raftStoreUsers may import raft too, for its in-memory stores only:
// internal/testcluster hands them to the servers of in-process clusters.
var raftStoreUsers = map[string]bool{"internal/testcluster": true}

// pure packages: deterministic, no I/O, no clock, no randomness of their own.
var pure = map[string]bool{"zxid": true, "vocab": true, "fsm": true, "session": true, "watch": true, "zk": true}

// forbiddenInPure are import paths the non-test files of pure packages may
// not use; each entry covers the path and every path under it.
var forbiddenInPure = []string{
	"log",              // log, log/slog, log/syslog: pure packages return errors, they do not log
	"golang.org/x/sys", // raw system calls
	"hash/maphash",     // randomly seeded per process: its hashes differ between servers
	"math/rand",        // math/rand and math/rand/v2
	"crypto/rand",      // randomness arrives in the command (session passwords)
	"net",              // net, net/http, net/netip, ...
	"os",               // os, os/exec, os/signal, ...
	"syscall",
	"github.com/hashicorp", // raft, raft-boltdb, memberlist, hclog
	"google.golang.org/grpc",
	"go.etcd.io", // bbolt
	"github.com/boltdb",
}

// noTimeImport are the pure packages that may not import time at all: they
// take time from their input. session may (durations, and its Clock).
var noTimeImport = map[string]bool{"zxid": true, "vocab": true, "fsm": true, "watch": true, "zk": true}

// clockFuncs are the functions of package time that read or wait on the
// clock; pure packages may not name them (a call or a func value alike).
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
}

// clockExempt reports whether a function may name time.<fn>: only session's
// SystemClock.Now, the one call to time.Now its Clock interface hides.
func clockExempt(pkg string, decl *ast.FuncDecl, fn string) bool {
	if pkg != "session" || fn != "Now" || decl == nil || decl.Name.Name != "Now" || decl.Recv == nil || len(decl.Recv.List) != 1 {
		return false
	}
	t := decl.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.Name == "SystemClock"
}

// table builds every package's row: the closure of drawn with its helpers,
// then offDiagram.
func table() (map[string]row, error) {
	rows := map[string]row{}
	for pkg := range drawn {
		seen := map[string]bool{}
		var visit func(string, []string) error
		visit = func(p string, path []string) error {
			for _, q := range drawn[p] {
				if _, ok := drawn[q]; !ok {
					return fmt.Errorf("drawn: %s -> %s: %s is not drawn", p, q, q)
				}
				if q == pkg {
					return fmt.Errorf("drawn: cycle %s -> %s", strings.Join(path, " -> "), q)
				}
				if !seen[q] {
					seen[q] = true
					if err := visit(q, append(path, q)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := visit(pkg, []string{pkg}); err != nil {
			return nil, err
		}
		var r row
		for q := range seen {
			r.imports = append(r.imports, q)
		}
		slices.Sort(r.imports)
		rows[pkg] = r
	}
	for pkg, hs := range helpers {
		r, ok := rows[pkg]
		if !ok {
			return nil, fmt.Errorf("helpers: %s is not drawn", pkg)
		}
		for _, h := range hs {
			if hr, ok := offDiagram[h]; !ok || hr.testOnly || len(hr.imports) > 0 {
				return nil, fmt.Errorf("helpers: %s -> %s: %s is not an off-diagram leaf", pkg, h, h)
			}
		}
		r.imports = append(r.imports, hs...)
		rows[pkg] = r
	}
	for pkg, r := range offDiagram {
		if _, dup := rows[pkg]; dup {
			return nil, fmt.Errorf("offDiagram: %s is drawn", pkg)
		}
		rows[pkg] = r
	}
	return rows, nil
}

// finding is one problem (or one use of a known deviation) at a place.
type finding struct {
	file string // slash-separated, relative to the checked root
	line int
	rule string // layering, known-deviation, unknown-package, test-only, pure-import, pure-clock, pure-go
	msg  string
	dev  edge // for rule known-deviation
}

func (f finding) String() string { return fmt.Sprintf("%s:%d: %s: %s", f.file, f.line, f.rule, f.msg) }

// result is what checkLayering found under one root.
type result struct {
	violations []finding
	deviations []finding // uses of knownDeviations, to log
	packages   []string  // every package directory seen
}

// checkLayering checks the module whose go.mod is in root against the tables
// above, with devs as the known deviations (knownDeviations for the real
// tree).
func checkLayering(root string, devs []edge) (*result, error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	rows, err := table()
	if err != nil {
		return nil, err
	}
	res := &result{}
	seen := map[string]bool{}
	add := func(fset *token.FileSet, pos token.Pos, file, rule, format string, args ...any) {
		line := 0
		if pos.IsValid() {
			line = fset.Position(pos).Line
		}
		res.violations = append(res.violations, finding{file: file, line: line, rule: rule, msg: fmt.Sprintf(format, args...)})
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			base := d.Name()
			if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		relPath, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(relPath)
		pkg := filepath.ToSlash(filepath.Dir(relPath))
		isTest := strings.HasSuffix(path, "_test.go")
		fset := token.NewFileSet()
		mode := parser.SkipObjectResolution
		if isTest {
			mode |= parser.ImportsOnly
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		r, known := rows[pkg]
		if !seen[pkg] {
			seen[pkg] = true
			res.packages = append(res.packages, pkg)
			if !known {
				add(fset, token.NoPos, rel, "unknown-package", "package %s has no row in deps_test.go (nor a place in docs/architecture.md's diagram)", pkg)
			}
		}
		if !known {
			return nil
		}
		if r.testOnly && !isTest && len(f.Decls) > 0 {
			// A doc.go holding only the package comment is fine.
			add(fset, f.Decls[0].Pos(), rel, "test-only", "%s is a test-only package: a non-test file with declarations makes it importable; give it a production row first", pkg)
		}
		checkImports(f, fset, rel, pkg, module, r, isTest, devs, res, add)
		if pure[pkg] && !isTest {
			checkPure(f, fset, rel, pkg, add)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

type addFunc func(fset *token.FileSet, pos token.Pos, file, rule, format string, args ...any)

func checkImports(f *ast.File, fset *token.FileSet, rel, pkg, module string, r row, isTest bool, devs []edge, res *result, add addFunc) {
	ok := slices.Clone(r.imports)
	kind := "non-test file"
	if isTest {
		ok = append(append(ok, r.tests...), testExtras[pkg]...)
		kind = "test file"
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !isTest && pkg != raftOwner && !raftStoreUsers[pkg] && (p == "github.com/hashicorp/raft" || strings.HasPrefix(p, "github.com/hashicorp/raft-") || strings.HasPrefix(p, "github.com/hashicorp/raft/")) {
			add(fset, imp.Pos(), rel, "raft-owner", "%s imports %s: only %s (the replica, which owns the peer plane) speaks to raft", pkg, p, raftOwner)
		}
		var target string
		switch {
		case p == module:
			target = "."
		case strings.HasPrefix(p, module+"/"):
			target = strings.TrimPrefix(p, module+"/")
		default:
			continue
		}
		if target == pkg || slices.Contains(ok, target) {
			continue
		}
		e := edge{pkg, target}
		if slices.Contains(devs, e) {
			res.deviations = append(res.deviations, finding{
				file: rel, line: fset.Position(imp.Pos()).Line, rule: "known-deviation", dev: e,
				msg: fmt.Sprintf("%s imports %s: not drawn in docs/architecture.md; a known deviation, to remove", pkg, p),
			})
			continue
		}
		add(fset, imp.Pos(), rel, "layering", "%s (%s) imports %s: not allowed by deps_test.go's table (docs/architecture.md, Who may import whom)", pkg, kind, p)
	}
}

func checkPure(f *ast.File, fset *token.FileSet, rel, pkg string, add addFunc) {
	timeName := ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbiddenInPure {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				add(fset, imp.Pos(), rel, "pure-import", "pure package %s imports %s: pure packages do no logging, no I/O and draw no randomness", pkg, p)
			}
		}
		if p != "time" {
			continue
		}
		if noTimeImport[pkg] {
			add(fset, imp.Pos(), rel, "pure-import", "pure package %s imports time: it takes time from its input", pkg)
		}
		switch {
		case imp.Name == nil:
			timeName = "time"
		case imp.Name.Name == ".":
			add(fset, imp.Pos(), rel, "pure-clock", "pure package %s dot-imports time, which hides clock reads", pkg)
		case imp.Name.Name != "_":
			timeName = imp.Name.Name
		}
	}
	for _, decl := range f.Decls {
		fd, _ := decl.(*ast.FuncDecl)
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				add(fset, n.Pos(), rel, "pure-go", "pure package %s starts a goroutine: concurrency belongs to its caller", pkg)
			case *ast.SelectorExpr:
				// A local variable named like the time import counts as the
				// package: do not name one so.
				if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && clockFuncs[n.Sel.Name] && !clockExempt(pkg, fd, n.Sel.Name) {
					add(fset, n.Pos(), rel, "pure-clock", "pure package %s reads the clock with time.%s: time comes from its input (session: through its Clock)", pkg, n.Sel.Name)
				}
			}
			return true
		})
	}
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

func TestDependencies(t *testing.T) {
	res, err := checkLayering(".", knownDeviations)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.packages) < 3 {
		t.Fatalf("found only %d packages; is the test running from the module root?", len(res.packages))
	}
	for _, v := range res.violations {
		t.Error(v)
	}
	used := map[edge]bool{}
	for _, d := range res.deviations {
		used[d.dev] = true
		t.Log(d)
	}
	for _, e := range knownDeviations {
		if !used[e] {
			t.Errorf("known deviation %s -> %s no longer occurs: delete it from knownDeviations", e.from, e.to)
		}
	}
}

// TestDiagramMatchesDocs keeps drawing (and so drawn) equal to the diagram
// docs/architecture.md shows.
func TestDiagramMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## Who may import whom\n")
	if !ok {
		t.Fatal("docs/architecture.md has no \"## Who may import whom\" section")
	}
	_, block, ok := strings.Cut(after, "```\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("docs/architecture.md: no ``` block under \"Who may import whom\"")
	}
	trim := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " \t")
		}
		return strings.Join(lines, "\n")
	}
	if got, want := trim(block), trim(drawing); got != want {
		t.Errorf("the diagram in docs/architecture.md changed; update drawing and drawn in deps_test.go to match.\ndocs:\n%s\ndeps_test.go:\n%s", got, want)
	}
}

// TestLayeringCatchesPlanted runs the checker on a small module under
// testdata/deps/planted (which the go tool and the real check skip) and
// expects exactly the violations planted there. It lists client -> fsm as a
// known deviation of its own (the real tree has none) to show that one is
// logged, not failed.
func TestLayeringCatchesPlanted(t *testing.T) {
	res, err := checkLayering(filepath.Join("testdata", "deps", "planted"), []edge{{"client", "fsm"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ file, rule, text string }{
		// fsm: forbidden imports, a clock read, a goroutine, an upward edge.
		{"fsm/bad.go", "pure-import", "imports net"},
		{"fsm/bad.go", "pure-import", "imports time"},
		{"fsm/bad.go", "layering", "fsm (non-test file) imports coord/server"},
		{"fsm/bad.go", "pure-clock", "time.Now"},
		{"fsm/bad.go", "pure-go", "starts a goroutine"},
		{"fsm/more.go", "pure-import", "imports log/slog"},
		{"fsm/more.go", "pure-import", "imports hash/maphash"},
		{"fsm/more.go", "pure-import", "imports golang.org/x/sys/unix"},
		{"fsm/more.go", "pure-import", "imports math/rand/v2"},
		{"fsm/more.go", "pure-import", "imports crypto/rand"},
		{"fsm/more.go", "pure-import", "imports os/exec"},
		{"fsm/more.go", "pure-import", "imports syscall"},
		{"fsm/more.go", "pure-import", "imports github.com/hashicorp/raft"},
		{"fsm/more.go", "raft-owner", "only server/replica"},
		// Only the replica speaks to raft.
		{"server/raft.go", "raft-owner", "server imports github.com/hashicorp/raft"},
		{"fsm/more.go", "pure-import", "imports google.golang.org/grpc"},
		{"fsm/more.go", "pure-import", "imports go.etcd.io/bbolt"},
		// A test file may use what production code may not, but not import upward.
		{"fsm/ok_test.go", "layering", "fsm (test file) imports coord/client"},
		// A subpackage is its own entry, not part of its parent.
		{"fsm/sub/sub.go", "unknown-package", "package fsm/sub has no row"},
		// session: only SystemClock.Now may call time.Now.
		{"session/clock.go", "pure-clock", "time.Now"},   // in SystemClock.Later
		{"session/clock.go", "pure-clock", "time.Since"}, // in a plain function
		{"session/alias.go", "pure-clock", "time.After"}, // through a renamed import
		{"watch/w.go", "pure-import", "imports time"},
		{"watch/w.go", "pure-clock", "time.Now"}, // a func value, not a call
		{"zxid/z.go", "layering", "zxid (non-test file) imports coord/fsm"},
		// vocab: a leaf and pure.
		{"vocab/v.go", "layering", "vocab (non-test file) imports coord/zxid"},
		{"vocab/v.go", "pure-import", "imports time"},
		{"vocab/v.go", "pure-import", "imports os"},
		{"client/c.go", "layering", "client (non-test file) imports coord/session"},
		{"client/c.go", "layering", "client (non-test file) imports coord/server"},
		{"zk/compat/helper.go", "test-only", "zk/compat is a test-only package"},
		{"zk/compat/compat_test.go", "layering", "zk/compat (test file) imports coord/client"},
		{"newpkg/x.go", "unknown-package", "package newpkg has no row"},
	}
	got := slices.Clone(res.violations)
	for _, w := range want {
		i := slices.IndexFunc(got, func(f finding) bool {
			return f.file == w.file && f.rule == w.rule && strings.Contains(f.msg, w.text)
		})
		if i < 0 {
			t.Errorf("not reported: %s: %s: ...%s...", w.file, w.rule, w.text)
			continue
		}
		s := got[i].String()
		if !strings.HasPrefix(s, w.file+":") || !strings.Contains(s, ": "+w.rule+": ") {
			t.Errorf("message %q does not name the file %s and the rule %s", s, w.file, w.rule)
		}
		got = slices.Delete(got, i, i+1)
	}
	for _, f := range got {
		t.Errorf("reported but not planted: %s", f)
	}
	// client -> fsm is a known deviation: logged, not failed.
	if len(res.deviations) != 1 || res.deviations[0].file != "client/c.go" || res.deviations[0].dev != (edge{"client", "fsm"}) {
		t.Errorf("deviations = %v, want the one use of client -> fsm in client/c.go", res.deviations)
	}
}
