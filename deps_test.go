package coord_test

// The layering of docs/architecture.md as a test: each package may import
// only the coord packages listed for it, and the pure packages may not reach
// for clocks, randomness, the network or raft. A new package must be added
// here before it builds into the tree.

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "coord"

// allowed lists, per package, the coord packages it may import.
var allowed = map[string][]string{
	"zxid":         {},
	"fsm":          {"zxid"},
	"session":      {"fsm", "zxid"},
	"watch":        {"fsm", "zxid"},
	"zk":           {"fsm", "zxid"},
	"api":          {},
	"server":       {"fsm", "zxid", "session", "watch", "zk", "api"},
	"client":       {"api", "fsm", "zxid", "zk"},
	"recipes":      {},
	"cmd/coord":    {"server", "fsm", "zxid", "session", "zk", "api", "client"},
	"cmd/coordctl": {"client", "api", "fsm", "zxid", "zk"},
	"jepsen":       {"client", "fsm", "zxid", "zk", "api"},

	"cmd/coordbench": {"client", "api", "fsm", "zxid", "zk"},
	"cmd/watchmem":   {},
}

// pure packages: deterministic, no I/O of their own.
var pure = map[string]bool{"zxid": true, "fsm": true, "session": true, "watch": true, "zk": true}

// forbiddenInPure are import paths (or prefixes ending in "/") the pure
// packages may not use. session may import time: its SystemClock is the one
// place a clock is read, injected everywhere else.
var forbiddenInPure = []string{
	"net", "net/", "os", "os/", "syscall", "math/rand", "math/rand/", "crypto/rand",
	"github.com/hashicorp/", "google.golang.org/grpc", "go.etcd.io/",
}

var forbiddenTime = map[string]bool{"fsm": true, "zxid": true, "watch": true, "zk": true}

func TestDependencies(t *testing.T) {
	imports := map[string]map[string]bool{} // package dir -> imports (non-test files)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != "." && (strings.HasPrefix(base, ".") || base == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			imports[dir][p] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < 3 {
		t.Fatalf("found only %d packages; is the test running from the module root?", len(imports))
	}
	for dir, imps := range imports {
		pkg := topPackage(dir)
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s is not in deps_test.go's table (and docs/architecture.md)", dir)
			continue
		}
		for imp := range imps {
			if inner, isOurs := strings.CutPrefix(imp, module+"/"); isOurs {
				if topPackage(inner) == pkg {
					continue
				}
				if !contains(ok, topPackage(inner)) {
					t.Errorf("%s imports %s: not allowed by the layering", dir, imp)
				}
				continue
			}
			if !pure[pkg] {
				continue
			}
			if imp == "time" && forbiddenTime[pkg] {
				t.Errorf("%s imports time: pure packages take time from their input", dir)
			}
			for _, bad := range forbiddenInPure {
				if imp == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(imp, bad)) {
					t.Errorf("%s imports %s: pure packages do no I/O and draw no randomness", dir, imp)
				}
			}
		}
	}
}

// topPackage maps a directory to its table entry: "fsm/x" -> "fsm",
// "cmd/coord/y" -> "cmd/coord".
func topPackage(dir string) string {
	parts := strings.Split(dir, "/")
	if parts[0] == "cmd" && len(parts) > 1 {
		return "cmd/" + parts[1]
	}
	return parts[0]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
