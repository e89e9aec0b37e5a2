package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"path/filepath"
	"strings"
	"testing"

	"coord/client"
	"coord/vocab"
)

// The test clusters' admin identity: every server newProcs prepares has
// ctlAdminDigest as its -super-digest, and the admin commands (sessions,
// sessions kill, endpoint hashkv, snapshot save and take, add-voter,
// add-observer, promote, remove, move-leader) pass --user ctlAdminUser.
const ctlAdminUser = "super:ctl-admin"

var ctlAdminDigest = vocab.DigestID("super", "ctl-admin")

// Issue 26: the admin commands need an admin identity. Without one, or
// with a wrong password, each fails with exit 8 and a line that says which
// credential to pass or which was wrong, and changes nothing; status and
// members need none; COORDCTL_USER is --user's default.
func TestAdminIdentity(t *testing.T) {
	c := shared(t)
	s := c.grpcAddrs()
	want := "the server wants an admin identity: pass --user super:<password> (its -super-digest) or --cert/--key with a certificate in its -admin-x509\n"
	for _, args := range [][]string{
		{"sessions"}, {"sessions", "kill", "0x1"}, {"snapshot", "save", filepath.Join(t.TempDir(), "x.snap")},
		{"snapshot", "take"}, {"endpoint", "hashkv"}, {"remove", "s1"}, {"move-leader"}, {"add-observer", "ghost", "127.0.0.1:1"},
	} {
		r := fails(t, s, exitNoAuth, args...)
		if !strings.HasSuffix(r.stderr, want) {
			t.Errorf("coordctl %s without --user: %q", strings.Join(args, " "), r.stderr)
		}
	}
	r := fails(t, s, exitNoAuth, "--user", "super:wrong", "sessions", "kill", "0x1")
	if !strings.HasPrefix(r.stderr, "coordctl: sessions kill at ") || !strings.Contains(r.stderr, "the server refused the admin identity (--user super)") ||
		!strings.Contains(r.stderr, "check --user") || strings.Contains(r.stderr, "wrong") {
		t.Errorf("sessions kill with a wrong password: %q", r.stderr)
	}
	var members []memberJSON
	jsonOut(t, s, &members, "members")
	if len(members) != 3 {
		t.Fatalf("members after the refused calls: %+v", members)
	}
	mustRun(t, s, "status")
	// COORDCTL_USER stands in for --user; --user beats it.
	withEnv := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bins.ctl, args...)
		cmd.Env = append(ctlEnv(t, s), "COORDCTL_USER="+ctlAdminUser)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		return r
	}
	if r := withEnv("sessions"); r.code != 0 || !strings.HasPrefix(r.stdout, "SESSION") {
		t.Fatalf("sessions with COORDCTL_USER: %+v", r)
	}
	if r := withEnv("--user", "super:wrong", "sessions"); r.code != exitNoAuth {
		t.Fatalf("--user over COORDCTL_USER: %+v", r)
	}
}

// sessions lists a live session with its ephemeral; sessions kill closes
// it (its ephemeral goes); endpoint hashkv finds every member at one
// index with one hash; snapshot save writes the state to a file.
func TestSessionsHashKVSnapshotSave(t *testing.T) {
	c := shared(t)
	s := c.grpcAddrs()
	// A session of the test's own holds an ephemeral.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held, _, err := client.Connect(ctx, strings.Split(s, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	fresh(t, s, "/held")
	mustRun(t, s, "create", "/held")
	if _, err := held.Create(ctx, "/held/eph", nil, vocab.ModeEphemeral, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("0x%x", held.SessionID())
	var sessions []struct {
		ID         string
		Server     string
		Ephemerals int64
	}
	jsonOut(t, s, &sessions, "--user", ctlAdminUser, "sessions")
	i := slices.IndexFunc(sessions, func(x struct {
		ID         string
		Server     string
		Ephemerals int64
	}) bool {
		return x.ID == id
	})
	if i < 0 || sessions[i].Ephemerals != 1 || sessions[i].Server == "" {
		t.Fatalf("sessions: %s not listed with its ephemeral: %+v", id, sessions)
	}
	if out := mustRun(t, s, "--user", ctlAdminUser, "sessions"); !strings.HasPrefix(out, "SESSION") || !strings.Contains(out, id) {
		t.Fatalf("sessions text: %q", out)
	}
	if out := mustRun(t, s, "--user", ctlAdminUser, "sessions", "kill", id); !strings.Contains(out, id+" closed") {
		t.Fatalf("sessions kill: %q", out)
	}
	fails(t, s, exitNoNode, "get", "/held/eph")
	fails(t, s, exitNoNode, "--user", ctlAdminUser, "sessions", "kill", id)
	fails(t, s, exitUsage, "sessions", "kill", "zz")

	var hashes []struct {
		ID    string
		Index uint64 `json:"applied_index"`
		Hash  string
		Error string
	}
	jsonOut(t, s, &hashes, "--user", ctlAdminUser, "endpoint", "hashkv")
	if len(hashes) != 3 {
		t.Fatalf("hashkv: %+v", hashes)
	}
	for _, h := range hashes {
		if h.Error != "" || h.Hash == "" || h.Index != hashes[0].Index || h.Hash != hashes[0].Hash {
			t.Fatalf("hashkv: members disagree or failed: %+v", hashes)
		}
	}

	file := filepath.Join(t.TempDir(), "backup.snap")
	if out := mustRun(t, s, "--user", ctlAdminUser, "snapshot", "save", file); !strings.HasPrefix(out, "saved ") {
		t.Fatalf("snapshot save: %q", out)
	}
	if st, err := os.Stat(file); err != nil || st.Size() < 100 {
		t.Fatalf("snapshot file: %v %v", st, err)
	}
}

// check perf runs its two phases, reports them with a verdict and leaves
// nothing behind (the verdict itself depends on the machine: exit 0 or 10).
func TestCheckPerf(t *testing.T) {
	s := shared(t).grpcAddrs()
	r := ctl(t, s, "", "-o", "json", "check", "perf", "--duration", "1s")
	if r.code != 0 && r.code != exitCheckFailed {
		t.Fatalf("check perf: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Load   string
		Pass   bool
		Phases []struct {
			Op     string
			Ops    int
			PerSec float64 `json:"per_sec"`
			P99    string
			Pass   bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("check perf json: %v: %q", err, r.stdout)
	}
	if out.Load != "s" || len(out.Phases) != 2 || out.Phases[0].Op != "setData" || out.Phases[1].Op != "getData" ||
		out.Phases[0].Ops == 0 || out.Phases[1].Ops == 0 || out.Pass != (r.code == 0) {
		t.Fatalf("check perf: %+v (exit %d)", out, r.code)
	}
	if ls := mustRun(t, s, "ls", "/"); strings.Contains(ls, "coordctl-check-perf") {
		t.Fatalf("check perf left its directory: %q", ls)
	}
	fails(t, s, exitUsage, "check", "perf", "--load", "huge")
}

// snapshot save → snapshot restore → a new server on the restored
// directory serves the same state (the same hashkv hash).
func TestSnapshotRestore(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/restore-me")
	mustRun(t, s, "create", "/restore-me", "v")
	file := filepath.Join(t.TempDir(), "backup.snap")
	mustRun(t, s, "--user", ctlAdminUser, "snapshot", "save", file)
	before := exportDigest(t, s)

	c := newProcs(t, t.TempDir(), 1, 0)
	p := c.nodes[0]
	dir := filepath.Join(t.TempDir(), "restored")
	var restored struct {
		Hash  string
		Index uint64
	}
	jsonOut(t, s, &restored, "snapshot", "restore", file, "--data-dir", dir, "--id", p.id, "--raft-addr", p.raft)
	fails(t, s, exitUsage, "snapshot", "restore", file, "--data-dir", dir)
	// The new server: the same flags as newProcs gives it, on the restored
	// directory, without -bootstrap.
	args := []string{"-id", p.id, "-data-dir", dir, "-raft-addr", p.raft, "-grpc-addr", p.grpc, "-zk-addr", p.zk,
		"-http-addr", p.http, "-gossip-addr", "", "-tick", "100ms", "-raft-timeout", "300ms", "-cluster-key-file", c.keyFile,
		"-super-digest", ctlAdminDigest, "-bootstrap=false"}
	p.args = args
	t.Cleanup(c.stop)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.waitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The restored server is a one-server cluster, so its leader rewrites
	// /zookeeper/config, an entry after the snapshot: the whole-state hash
	// moves on, and the user tree must be what was saved.
	var now []struct{ Hash string }
	jsonOut(t, p.grpc, &now, "--user", ctlAdminUser, "endpoint", "hashkv")
	if len(now) != 1 || now[0].Hash == "" {
		t.Fatalf("hashkv on the restored server: %+v", now)
	}
	if after := exportDigest(t, p.grpc); after != before {
		t.Fatalf("the restored server's tree has digest %s, the saved one %s", after, before)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		cfg := mustRun(t, p.grpc, "get", "/zookeeper/config")
		if strings.Count(cfg, "server.") == 1 && strings.Contains(cfg, p.raft) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/zookeeper/config on the restored server: %q", cfg)
		}
	}
	if out := mustRun(t, p.grpc, "get", "/restore-me"); strings.TrimSpace(out) != "v" {
		t.Fatalf("get on the restored server: %q", out)
	}
}

// export keeps containers and TTL nodes as what they are (their Stat shows
// them as persistent, as ZooKeeper's does), and import recreates them so.
func TestExportNodeKinds(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/kinds")
	fresh(t, s, "/kinds-copy")
	mustRun(t, s, "create", "/kinds")
	mustRun(t, s, "create", "-c", "/kinds/box")
	mustRun(t, s, "create", "/kinds/box/item")
	mustRun(t, s, "create", "--ttl", "1h", "/kinds/lease", "x")
	file := filepath.Join(t.TempDir(), "kinds.json")
	mustRun(t, s, "export", "/kinds", "--file", file)
	var f struct {
		Nodes []struct {
			Path  string
			Mode  string
			TTLms int64 `json:"ttl_ms"`
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, n := range f.Nodes {
		modes[n.Path] = fmt.Sprintf("%s/%d", n.Mode, n.TTLms)
	}
	if modes["/box"] != "container/0" || modes["/lease"] != "persistent_ttl/3600000" || modes["/box/item"] != "persistent/0" {
		t.Fatalf("exported kinds: %v", modes)
	}
	mustRun(t, s, "import", "--to", "/kinds-copy", file)
	again := filepath.Join(t.TempDir(), "again.json")
	mustRun(t, s, "export", "/kinds-copy", "--file", again)
	b2, _ := os.ReadFile(again)
	var g struct{ Digest string }
	var h struct{ Digest string }
	json.Unmarshal(b, &g)
	json.Unmarshal(b2, &h)
	if g.Digest == "" || g.Digest != h.Digest {
		t.Fatalf("the imported copy's kinds differ: digests %s and %s", g.Digest, h.Digest)
	}
}

// exportDigest is the digest of the whole tree as coordctl export writes it.
func exportDigest(t *testing.T, addr string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tree.json")
	mustRun(t, addr, "export", "/", "--file", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Digest string }
	if err := json.Unmarshal(b, &f); err != nil || f.Digest == "" {
		t.Fatalf("export file: %v %q", err, b)
	}
	return f.Digest
}
