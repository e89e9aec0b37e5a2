package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// TestAuditEveryPathOnce: every committed write is in the audit log once,
// with the identities it ran under, whichever way it came: a client's
// write through a follower (the follower's log), an operator's admin kill
// (the log of the server it asked, as the superuser) and a session's expiry
// (the leader's log, as the server itself). The servers' logs are separate
// files; each record must be in exactly one.
func TestAuditEveryPathOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) {
		withAdmin(cfg)
		cfg.AuditLog = filepath.Join(dir, cfg.ID+".log")
	})
	li := c.Leader()
	fi := (li + 1) % 3
	follower := c.Servers[fi]

	writer := newSession(t, follower.GRPCAddr())
	mustOK(t, writer.do(&api.Request{Op: &api.Request_Auth{Auth: &api.AuthRequest{Scheme: "digest", Auth: []byte("alice:pw")}}}))
	mustOK(t, writer.create("/audited", "1", vocab.ModePersistent))

	killed := newSession(t, follower.GRPCAddr())
	mustOK(t, killed.create("/killed-eph", "", vocab.ModeEphemeral))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adminClient(t, follower.GRPCAddr()).KillSession(ctx, &api.KillSessionRequest{Id: killed.id}); err != nil {
		t.Fatalf("kill: %v", err)
	}

	expiring, err := dialSession(t, follower.GRPCAddr(), &api.ConnectRequest{TimeoutMs: 300})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, expiring.create("/expiring-eph", "", vocab.ModeEphemeral))
	expiring.drop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, ok := c.Servers[li].View().Session(expiring.id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dropped session did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the leader records the expiry as its close completes
	for _, s := range c.Servers {
		s.Close() // writes what is queued
	}

	var all []string
	for _, s := range c.Servers {
		b, err := os.ReadFile(filepath.Join(dir, s.ID()+".log"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				all = append(all, s.ID()+": "+l)
			}
		}
	}
	want := []struct {
		what   string
		server string
		parts  []string
	}{
		{"the client's create through a follower", follower.ID(), []string{"operation=create", "znode=/audited", "user=127.0.0.1,alice", "result=success"}},
		{"the admin's kill", follower.ID(), []string{"operation=closeSession", fmt.Sprintf("session=0x%x", killed.id), "user=super", "result=success"}},
		// Whichever server led when the session expired, as itself.
		{"the expiry", "", []string{"operation=closeSession", fmt.Sprintf("session=0x%x", expiring.id), "user=coord:", "result=success"}},
	}
	for _, w := range want {
		var found []string
		for _, l := range all {
			ok := true
			for _, p := range w.parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				found = append(found, l)
			}
		}
		server := w.server
		if server == "" && len(found) == 1 {
			server, _, _ = strings.Cut(found[0], ": ")
			if !strings.Contains(found[0], "user=coord:"+server+" ") {
				t.Errorf("%s: recorded by %s under another name: %s", w.what, server, found[0])
			}
		}
		if len(found) != 1 || !strings.HasPrefix(found[0], server+": ") {
			t.Errorf("%s: want one record in %s's audit log, found %d: %q\nall:\n%s", w.what, server, len(found), found, strings.Join(all, "\n"))
		}
	}
}
