package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"coord/api"
	"coord/vocab"
)

// -audit-log records each write of the server's clients (session, users,
// address, operation, znode, node type, result) and each authentication,
// in order, and the server's stop writes out what was queued.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) { cfg.AuditLog = path })
	s := newSession(t, c.Servers[0].GRPCAddr())
	mustOK(t, s.do(&api.Request{Op: &api.Request_Auth{Auth: &api.AuthRequest{Scheme: "digest", Auth: []byte("alice:pw")}}}))
	mustOK(t, s.create("/a", "1", vocab.ModePersistent))
	mustOK(t, s.create("/a/e-", "", vocab.ModeEphemeralSequential))
	if r := s.do(&api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: "/a", Data: []byte("2"), Version: 9}}}); r.Err != int32(vocab.BadVersion) {
		t.Fatalf("setData with a wrong version: %v", vocab.Code(r.Err))
	}
	mustOK(t, s.do(&api.Request{Op: &api.Request_Delete{Delete: &api.DeleteRequest{Path: "/a/e-0000000000", Version: -1}}}))
	if r := s.do(&api.Request{Op: &api.Request_Auth{Auth: &api.AuthRequest{Scheme: "digest", Auth: []byte{0xff}}}}); r.Err != int32(vocab.AuthFailed) {
		t.Fatalf("auth with bad bytes: %v", vocab.Code(r.Err))
	}
	c.Servers[0].Close()

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The leader's own upkeep of /zookeeper/config (server/reconfig) is
	// audited too, whenever it runs: the session's records are the rest.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(l, "znode=/zookeeper/config") {
			lines = append(lines, l)
		}
	}
	want := [][]string{
		{"operation=addAuth", "scheme=digest", "result=success", "user=127.0.0.1,alice"},
		{"operation=create", "znode=/a ", "znode_type=persistent", "result=success"},
		{"operation=create", "znode=/a/e-0000000000", "znode_type=ephemeral_sequential", "result=success"},
		{"operation=setData", "znode=/a ", "result=failure", `code="bad version"`},
		{"operation=delete", "znode=/a/e-0000000000", "result=success"},
		{"operation=addAuth", "result=failure"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit records, want %d:\n%s", len(lines), len(want), b)
	}
	for i, w := range want {
		for _, field := range w {
			if !strings.Contains(lines[i]+" ", field) {
				t.Errorf("record %d %q lacks %q", i+1, lines[i], field)
			}
		}
		if !strings.Contains(lines[i], "session=0x") || !strings.Contains(lines[i], "ip=127.0.0.1") {
			t.Errorf("record %d %q lacks the session or address", i+1, lines[i])
		}
	}
}
