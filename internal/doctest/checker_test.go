package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestParse(t *testing.T) {
	md := strings.Join([]string{
		"# A page",
		"```sh",
		"go run ./cmd/coord        # run coord",
		"go test -race ./...       # this test: not run",
		"go build -o coord ./cmd/coord",
		"P='a=1;b=2'",
		"./coord -id s1 -http-addr 127.0.0.1:3181 -peers \"$P\"",
		"./coord keygen -o k",
		"```",
		"<!-- doc: skip needs Docker -->",
		"```sh",
		"docker-compose up",
		"```",
		"<!-- doc:",
		"$ printf 'x\\n'",
		"x",
		"-->",
		"```",
		"$ coordctl get /nope",
		"coordctl: get /nope: node does not exist",
		"[exit 4]",
		"$ coordctl ls /",
		"zookeeper",
		"```",
		"```json",
		"{\"not\": \"run\"}",
		"```",
	}, "\n")
	p, err := parse(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{kind: stepServer, line: 3, cmd: "coord        # run coord"},
		{kind: stepRun, line: 5, cmd: `cp "$DOCBIN/coord" coord`},
		{kind: stepAssign, line: 6, cmd: "P='a=1;b=2'"},
		{kind: stepServer, line: 7, cmd: "./coord -id s1 -http-addr 127.0.0.1:3181 -peers \"$P\""},
		{kind: stepRun, line: 8, cmd: "./coord keygen -o k"},
		{kind: stepTranscript, line: 15, cmd: "printf 'x\\n'", want: []string{"x"}, hidden: true},
		{kind: stepTranscript, line: 19, cmd: "coordctl get /nope", want: []string{"coordctl: get /nope: node does not exist"}, exit: 4},
		{kind: stepTranscript, line: 22, cmd: "coordctl ls /", want: []string{"zookeeper"}},
	}
	if n := len(p.steps); n == 0 || p.steps[n-1].kind != stepWait {
		t.Fatalf("the last step is not the wait for the servers: %+v", p.steps)
	}
	p.steps = p.steps[:len(p.steps)-1]
	if len(p.steps) != len(want) {
		t.Fatalf("steps:\n%+v\nwant\n%+v", p.steps, want)
	}
	for i := range want {
		g, w := p.steps[i], want[i]
		if g.kind != w.kind || g.line != w.line || g.cmd != w.cmd || g.exit != w.exit || g.hidden != w.hidden || strings.Join(g.want, "|") != strings.Join(w.want, "|") {
			t.Errorf("step %d: %+v, want %+v", i, g, w)
		}
	}
	if len(p.skipped) != 1 || !strings.Contains(p.skipped[0], "needs Docker") {
		t.Errorf("skipped %q", p.skipped)
	}
	if got := serverHealth(p.steps[3].cmd); len(got) != 1 || got[0] != "127.0.0.1:3181" {
		t.Errorf("health of %q: %v", p.steps[3].cmd, got)
	}
	if got := serverHealth("./coord local -base-port 2000 -observers 0"); strings.Join(got, ",") != "127.0.0.1:2301,127.0.0.1:2302,127.0.0.1:2303" {
		t.Errorf("health of coord local: %v", got)
	}
}

func TestOutputMatches(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"cZxid = 0x100000002", "cZxid = 0x20000001f", true},
		{"ctime = Mon Nov 23 12:45:13 UTC 2026", "ctime = Thu Nov 26 07:01:02 UTC 2026", true},
		{"ID  ROLE", "ID      ROLE", true},
		{"Created /app", "Created /apps", false},
		{"sha256:319d7a1d...3b59", "sha256:319d7a1d25907ed103b2eed2928512fdd2bb2428c056c1e4305f6618252c3b59", true},
		{"sha256:319d7a1d...3b59", "sha256:419d7a1d25907ed103b2eed2928512fdd2bb2428c056c1e4305f6618252c3b59", false},
		{"a\n...\nz", "a\nb\nc\nz", true},
		{"a\n...\nz", "a\nz", true},
		{"a\n...\nz", "a\nb", false},
		{"dataLength = 14", "dataLength = 15", false},
		{"took 1.2ms", "took 3s", true},
		{"s1 40186e7e00ea085c404e0fc39986b79334c5280a69db870bf31eae4d866a9c78", "s1 9b703652357f235fa8fa4997e52e6869bbd44d71e3a7e4b0778bad9436c86c5f", true},
		{"s1 40186e7e00ea085c404e0fc39986b79334c5280a69db870bf31eae4d866a9c78", "s1 9b70365235", false},
	} {
		if got := outputMatches(splitOutput(c.want), splitOutput(c.got)); got != c.ok {
			t.Errorf("outputMatches(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}

// TestStaleOutputFails is the planted bug: a page whose shown output, exit
// code or command is stale must fail its script, and the same page with the
// true output must pass.
func TestStaleOutputFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds coord")
	}
	bin := buildBinaries(t)
	good := "```\n$ coord version\ncoord speaking ZooKeeper ...\n...\n$ coordctl --servers 127.0.0.1:1 get /\ncoordctl: no server answered at 127.0.0.1:1: ...\n[exit 3]\n```\n"
	for _, c := range []struct {
		name, page string
		fails      bool
	}{
		{"true", good, false},
		{"stale output", strings.Replace(good, "coord speaking ZooKeeper", "coord speaks ZooKeeper", 1), true},
		{"stale exit code", strings.Replace(good, "[exit 3]", "[exit 1]", 1), true},
		{"removed flag", strings.Replace(good, "--servers", "--server", 1), true},
		{"failing command", "```sh\ncoordctl --no-such-flag\n```\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := parse(c.page)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			f := filepath.Join(dir, "planted.txtar")
			if err := os.WriteFile(f, []byte(scriptText("planted.md", p)), 0o644); err != nil {
				t.Fatal(err)
			}
			ft := &fakeT{}
			testscript.RunT(ft, params(bin, []string{f}, map[string]page{"planted": p}))
			if ft.failed != c.fails {
				t.Fatalf("failed = %v, want %v; log:\n%s", ft.failed, c.fails, ft.log.String())
			}
			t.Logf("log:\n%s", ft.log.String())
		})
	}
}
