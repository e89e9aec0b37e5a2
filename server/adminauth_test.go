package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
)

// protectedAdminCalls are the Admin methods that reveal data or sessions
// or change the cluster, each called once (a stream read to its first
// answer). victim is the session KillSession names; follower the server
// RemoveServer names.
func protectedAdminCalls(victim int64, follower string) []struct {
	name string
	call func(context.Context, api.AdminClient) error
} {
	return []struct {
		name string
		call func(context.Context, api.AdminClient) error
	}{
		{"SaveSnapshot", func(ctx context.Context, a api.AdminClient) error {
			st, err := a.SaveSnapshot(ctx, &api.SaveSnapshotRequest{})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}},
		{"Sessions", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.Sessions(ctx, &api.SessionsRequest{})
			return err
		}},
		{"KillSession", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.KillSession(ctx, &api.KillSessionRequest{Id: victim})
			return err
		}},
		{"AddServer", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.AddServer(ctx, &api.AddServerRequest{Id: "ghost", RaftAddr: "127.0.0.1:1"})
			return err
		}},
		{"RemoveServer", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.RemoveServer(ctx, &api.RemoveServerRequest{Id: follower})
			return err
		}},
		{"TransferLeadership", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.TransferLeadership(ctx, &api.TransferLeadershipRequest{})
			return err
		}},
		{"Snapshot", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.Snapshot(ctx, &api.SnapshotRequest{})
			return err
		}},
		{"HashKV", func(ctx context.Context, a api.AdminClient) error {
			_, err := a.HashKV(ctx, &api.HashKVRequest{})
			return err
		}},
	}
}

// sessionOn opens a session stream over creds (newSession is plaintext).
func sessionOn(t *testing.T, addr string, creds credentials.TransportCredentials) *rawSession {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &rawSession{t: t, cc: cc, cancel: cancel}
	t.Cleanup(rs.drop)
	if rs.stream, err = api.NewCoordClient(cc).Session(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rs.stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Connect{Connect: &api.ConnectRequest{TimeoutMs: 10000}}}); err != nil {
		t.Fatal(err)
	}
	msg, err := rs.stream.Recv()
	if err != nil {
		t.Fatalf("session over TLS: %v", err)
	}
	r := msg.GetConnected()
	rs.id, rs.pw, rs.lastZx, rs.timeout = r.SessionId, r.Password, r.Zxid, r.TimeoutMs
	return rs
}

// membership is a server's raft configuration as "id:role" strings.
func membership(t *testing.T, s *Server) []string {
	t.Helper()
	resp, err := (&adminService{s: s}).Members(t.Context(), &api.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range resp.Members {
		out = append(out, m.Id+":"+m.Role)
	}
	slices.Sort(out)
	return out
}

// Issue 26, the admin plane: on a TLS cluster with -super-digest and
// -admin-x509, every Admin method that reveals data or sessions or changes
// the cluster refuses a caller with no credentials (Unauthenticated), with
// a wrong password, an unknown user or a client certificate not listed
// (PermissionDenied), and nothing changes: the victim's session and
// ephemeral live, the membership and the leader are the same. Status and
// Members answer anyone. The superuser's password, or an admin
// certificate, passes; so does any call on the peer plane.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	pki := NewTestPKI(t)
	der, key := pki.issue(t, 10, "coord admin", false)
	adminCert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) {
		pki.UseIn(cfg)
		withAdmin(cfg)
		cfg.AdminX509 = []string{"CN=ops,O=example", "CN=coord admin"}
	})
	tlsCreds := func(certs ...tls.Certificate) credentials.TransportCredentials {
		conf := pki.ClientTLS(false)
		conf.Certificates = certs
		return credentials.NewTLS(conf)
	}
	li := c.Leader()
	leader := c.Servers[li]
	follower := c.Servers[(li+1)%3]
	victim := sessionOn(t, follower.GRPCAddr(), tlsCreds())
	mustOK(t, victim.create("/victim-lock", "", vocab.ModeEphemeral))
	mustOK(t, victim.sync())
	before := membership(t, leader)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	strangers := []struct {
		name  string
		admin api.AdminClient
		want  codes.Code
		says  string
	}{
		{"no credentials", adminClientAs(t, leader.GRPCAddr(), tlsCreds(), ""), codes.Unauthenticated, "needs an admin identity"},
		{"plaintext", adminClientAs(t, leader.GRPCAddr(), insecure.NewCredentials(), ""), codes.Unavailable, ""},
		{"wrong password", adminClientAs(t, leader.GRPCAddr(), tlsCreds(), "super:wrong"), codes.PermissionDenied, `user "super" with that password`},
		{"unknown user", adminClientAs(t, leader.GRPCAddr(), tlsCreds(), "alice:"+testAdminPassword), codes.PermissionDenied, `user "alice"`},
		{"no colon", adminClientAs(t, leader.GRPCAddr(), tlsCreds(), "super"), codes.PermissionDenied, "-super-digest"},
		{"client certificate", adminClientAs(t, leader.GRPCAddr(), tlsCreds(pki.Client), ""), codes.PermissionDenied, `"CN=coord test client" is not in this server's -admin-x509`},
		{"certificate and wrong password", adminClientAs(t, leader.GRPCAddr(), tlsCreds(pki.Client), "super:wrong"), codes.PermissionDenied, "-admin-x509"},
	}
	for _, call := range protectedAdminCalls(victim.id, follower.ID()) {
		for _, s := range strangers {
			err := call.call(ctx, s.admin)
			st, _ := status.FromError(err)
			if err == nil || st.Code() != s.want || !strings.Contains(st.Message(), s.says) ||
				(s.want != codes.Unavailable && !strings.Contains(st.Message(), "admin call "+call.name)) {
				t.Errorf("%s as %s: %v, want %v saying %q", call.name, s.name, err, s.want, s.says)
			}
		}
	}
	// Nothing changed.
	mustOK(t, victim.ping())
	w := sessionOn(t, c.Servers[li].GRPCAddr(), tlsCreds())
	if r := w.get("/victim-lock", false); r.Err != 0 || r.GetGetData().GetStat().GetEphemeralOwner() != victim.id {
		t.Fatalf("the victim's lock after the refused calls: %v", r)
	}
	if after := membership(t, leader); !slices.Equal(after, before) {
		t.Fatalf("membership %v, before the refused calls %v", after, before)
	}
	if nl := c.Leader(); nl != li {
		t.Fatalf("the leader moved from %d to %d", li, nl)
	}
	// The open calls answer anyone.
	anyone := adminClientAs(t, leader.GRPCAddr(), tlsCreds(), "")
	if st, err := anyone.Status(ctx, &api.StatusRequest{}); err != nil || st.Id != leader.ID() {
		t.Fatalf("Status without credentials: %v %v", st, err)
	}
	if m, err := anyone.Members(ctx, &api.MembersRequest{}); err != nil || len(m.Members) != 3 {
		t.Fatalf("Members without credentials: %v %v", m, err)
	}

	// The superuser's password passes.
	super := adminClientAs(t, leader.GRPCAddr(), tlsCreds(), testAdminUser+":"+testAdminPassword)
	resp, err := super.Sessions(ctx, &api.SessionsRequest{})
	if err != nil || !slices.ContainsFunc(resp.Sessions, func(s *api.SessionInfo) bool { return s.Id == victim.id }) {
		t.Fatalf("Sessions as the superuser: %v %v", resp, err)
	}
	if _, err := super.HashKV(ctx, &api.HashKVRequest{}); err != nil {
		t.Fatalf("HashKV as the superuser: %v", err)
	}
	if _, err := super.Snapshot(ctx, &api.SnapshotRequest{}); err != nil {
		t.Fatalf("Snapshot as the superuser: %v", err)
	}
	if err := protectedAdminCalls(0, "")[0].call(ctx, super); err != nil {
		t.Fatalf("SaveSnapshot as the superuser: %v", err)
	}
	// An admin certificate passes (here with no password): a ghost observer
	// is added and removed again.
	certAdmin := adminClientAs(t, leader.GRPCAddr(), tlsCreds(adminCert), "")
	if _, err := certAdmin.AddServer(ctx, &api.AddServerRequest{Id: "ghost", RaftAddr: "127.0.0.1:1", Observer: true}); err != nil {
		t.Fatalf("AddServer with the admin certificate: %v", err)
	}
	if m := membership(t, leader); !slices.Contains(m, "ghost:observer") {
		t.Fatalf("membership after AddServer: %v", m)
	}
	if _, err := certAdmin.RemoveServer(ctx, &api.RemoveServerRequest{Id: "ghost"}); err != nil {
		t.Fatalf("RemoveServer with the admin certificate: %v", err)
	}
	if m := membership(t, leader); !slices.Equal(m, before) {
		t.Fatalf("membership after RemoveServer: %v, want %v", m, before)
	}
	// On the peer plane, no credentials are asked for.
	if _, err := (&adminService{s: follower, peer: true}).Sessions(ctx, &api.SessionsRequest{}); err != nil {
		t.Fatalf("Sessions on the peer plane: %v", err)
	}
	// The admin certificate kills the victim's session; the superuser moves
	// the leader.
	if _, err := adminClientAs(t, follower.GRPCAddr(), tlsCreds(adminCert), "").KillSession(ctx, &api.KillSessionRequest{Id: victim.id}); err != nil {
		t.Fatalf("KillSession with the admin certificate: %v", err)
	}
	mustOK(t, w.sync())
	if r := w.get("/victim-lock", false); r.Err != int32(vocab.NoNode) {
		t.Fatalf("the killed session's lock: %v", r)
	}
	if r, err := super.TransferLeadership(ctx, &api.TransferLeadershipRequest{}); err != nil || r.LeaderId == leader.ID() {
		t.Fatalf("TransferLeadership as the superuser: %v %v", r, err)
	}
}

// A server with neither -super-digest nor -admin-x509 answers the
// protected Admin methods on the client port to no one, saying how to
// configure an admin identity; Status and Members stay open, and the peer
// plane is served.
func TestAdminAuthUnconfigured(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim := newSession(t, srv.GRPCAddr())
	for _, call := range protectedAdminCalls(victim.id, "s1") {
		for _, up := range []string{"", "super:secret"} {
			err := call.call(ctx, adminClientAs(t, srv.GRPCAddr(), insecure.NewCredentials(), up))
			if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied ||
				!strings.Contains(st.Message(), "no admin identity configured") || !strings.Contains(st.Message(), "-super-digest") ||
				!strings.Contains(st.Message(), "-admin-x509") {
				t.Errorf("%s (credentials %q) on a server without admin identities: %v", call.name, up, err)
			}
		}
	}
	mustOK(t, victim.ping())
	open := adminClientAs(t, srv.GRPCAddr(), insecure.NewCredentials(), "")
	if _, err := open.Status(ctx, &api.StatusRequest{}); err != nil {
		t.Fatalf("Status: %v", err)
	}
	if _, err := open.Members(ctx, &api.MembersRequest{}); err != nil {
		t.Fatalf("Members: %v", err)
	}
	if _, err := (&adminService{s: srv, peer: true}).HashKV(ctx, &api.HashKVRequest{}); err != nil {
		t.Fatalf("HashKV on the peer plane: %v", err)
	}
}

// No session password leaves a server in a saved snapshot: the stream of a
// server with a live session holds none of its password's bytes; restored,
// the session is there (with its ephemeral) but neither its old password,
// nor a zero one, nor none re-attaches to it.
func TestSaveSnapshotHoldsNoPasswords(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 1, 0, withAdmin)
	srv := c.Servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/held", "", vocab.ModeEphemeral))
	mustOK(t, s.sync())
	info, ok := srv.View().Session(s.id)
	if !ok || len(info.Password) != 16 || !bytes.Equal(info.Password, s.pw) {
		t.Fatalf("session 0x%x: %v %x (the client got %x)", s.id, ok, info.Password, s.pw)
	}
	snap := saveSnapshot(t, ctx, srv.GRPCAddr())
	if bytes.Contains(snap, info.Password) {
		t.Fatal("the saved snapshot holds the session's password")
	}
	// The full stream does hold it, so the search above means something.
	var full bytes.Buffer
	srv.View().WriteTo(&full)
	if !bytes.Contains(full.Bytes(), info.Password) {
		t.Fatal("the state's own stream does not hold the password")
	}

	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, snap, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := restoreServer(t, file)
	if got, ok := restored.View().Session(s.id); !ok || len(got.Password) != 0 || got.Ephemerals != 1 {
		t.Fatalf("the restored session: %v %+v", ok, got)
	}
	for _, pw := range [][]byte{nil, make([]byte, 16), info.Password} {
		_, err := dialSession(t, restored.GRPCAddr(), &api.ConnectRequest{SessionId: s.id, Password: pw, TimeoutMs: 10000})
		if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated {
			t.Fatalf("re-attaching to the restored session with password %x: %v", pw, err)
		}
	}
	if _, ok := restored.View().Session(s.id); !ok {
		t.Fatal("the restored session expired before the re-attach attempts: they prove nothing")
	}
}

// A session whose stored password is all zeros (as a snapshot scrubbed by
// zeroing would carry) is re-attached by no password, zeros included; one
// with a real password is re-attached by it.
func TestZeroStoredPasswordMatchesNothing(t *testing.T) {
	f := fsm.New()
	now := time.Now().UnixMilli()
	real := []byte("0123456789abcdef")
	var ids []int64
	for _, pw := range [][]byte{make([]byte, 16), real} {
		r, _ := f.Apply(1, &fsm.Command{Type: fsm.CmdCreateSession, Time: now, Timeout: 20000, Password: pw})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids = append(ids, r.SessionID)
	}
	var buf bytes.Buffer
	buf.Write(binary.AppendUvarint(nil, 10))
	if _, err := f.View().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "zero.snap")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := restoreServer(t, file)
	for _, pw := range [][]byte{make([]byte, 16), nil, {}} {
		_, err := dialSession(t, srv.GRPCAddr(), &api.ConnectRequest{SessionId: ids[0], Password: pw, TimeoutMs: 10000})
		if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated {
			t.Fatalf("re-attaching to a session with a zero password, with %x: %v", pw, err)
		}
	}
	if _, ok := srv.View().Session(ids[0]); !ok {
		t.Fatal("the zero-password session expired before the attempts: they prove nothing")
	}
	rs, err := dialSession(t, srv.GRPCAddr(), &api.ConnectRequest{SessionId: ids[1], Password: real, TimeoutMs: 10000})
	if err != nil || rs.id != ids[1] {
		t.Fatalf("re-attaching with the real password: %v", err)
	}
	mustOK(t, rs.ping())
}

// restoreServer starts a one-server cluster from a saved snapshot file,
// as coordctl snapshot restore and the restored server do.
func restoreServer(t *testing.T, file string) *Server {
	t.Helper()
	cfg := testConfig(t, "r1")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RaftAddr = lis.Addr().String()
	lis.Close()
	cfg.DataDir = filepath.Join(t.TempDir(), "restored")
	if _, _, err := replica.RestoreDataDir(file, cfg.DataDir, "r1", cfg.RaftAddr, cfg.LogStore, cfg.Logger); err != nil {
		t.Fatalf("restore: %v", err)
	}
	rc := emptyCluster(t)
	srv := rc.Start(cfg)
	rc.Leader()
	return srv
}

func TestSplitAdminX509(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                nil,
		"CN=ops,O=example":                {"CN=ops,O=example"},
		" CN=a,O=x ; CN=b+UID=7,O=y;; ":   {"CN=a,O=x", "CN=b+UID=7,O=y"},
		`CN=semi\;colon,O=x;CN=b`:         {`CN=semi\;colon,O=x`, "CN=b"},
		`CN=back\\;CN=slash`:              {`CN=back\\`, "CN=slash"},
		`CN=quoted\,comma,OU=a;OU=b,O=c `: {`CN=quoted\,comma,OU=a`, "OU=b,O=c"},
	} {
		if got := SplitAdminX509(in); !slices.Equal(got, want) {
			t.Errorf("SplitAdminX509(%q) = %q, want %q", in, got, want)
		}
	}
}
