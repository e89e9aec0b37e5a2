package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
)

// saveSnapshot streams a server's state through Admin.SaveSnapshot.
func saveSnapshot(t *testing.T, ctx context.Context, addr string) []byte {
	t.Helper()
	stream, err := adminClient(t, addr).SaveSnapshot(ctx, &api.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	for {
		ch, err := stream.Recv()
		if err == io.EOF {
			return snap.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		snap.Write(ch.Data)
	}
}

// The admin identity of test clusters that call the protected Admin
// methods: the superuser super:admin-test (withAdmin configures it).
const testAdminUser, testAdminPassword = "super", "admin-test"

// withAdmin makes the superuser super:admin-test an admin identity of a
// test server.
func withAdmin(cfg *Config) { cfg.SuperDigest = vocab.DigestID(testAdminUser, testAdminPassword) }

// adminClient is an Admin client that sends the test superuser's user and
// password on every call.
func adminClient(t *testing.T, addr string) api.AdminClient {
	t.Helper()
	return adminClientAs(t, addr, insecure.NewCredentials(), testAdminUser+":"+testAdminPassword)
}

// adminClientAs is an Admin client over creds that sends userPassword as
// the admin digest ("": none).
func adminClientAs(t *testing.T, addr string, creds credentials.TransportCredentials, userPassword string) api.AdminClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if userPassword != "" {
		md := func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, api.AdminDigestMetadata, userPassword)
		}
		opts = append(opts,
			grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(md(ctx), method, req, reply, cc, o...)
			}),
			grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(md(ctx), desc, cc, method, o...)
			}))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return api.NewAdminClient(cc)
}

// The operator calls behind coordctl's sessions, endpoint hashkv and
// snapshot save (as the superuser): every server lists the session table
// and marks its own sessions; a killed session is closed through the log
// (its ephemeral goes); every server answers the same digest at the same
// index; a saved snapshot (without session passwords) restores to that
// state (HashKV's digest is of the state without them).
func TestAdminSessionsHashKVSnapshot(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, withAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	li := c.Leader()
	here := c.Servers[(li+1)%3]
	s := newSession(t, here.GRPCAddr())
	mustOK(t, s.create("/e", "", vocab.ModeEphemeral))
	mustOK(t, s.sync())

	resp, err := adminClient(t, here.GRPCAddr()).Sessions(ctx, &api.SessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var found *api.SessionInfo
	for _, si := range resp.Sessions {
		if si.Id == s.id {
			found = si
		}
	}
	if found == nil || !found.ConnectedHere || found.Ephemerals != 1 || found.TimeoutMs == 0 {
		t.Fatalf("session 0x%x in %v", s.id, resp.Sessions)
	}
	other, err := adminClient(t, c.Servers[li].GRPCAddr()).Sessions(ctx, &api.SessionsRequest{})
	if err != nil || len(other.Sessions) != len(resp.Sessions) || other.Sessions[0].ConnectedHere {
		t.Fatalf("the leader's list: %v %v", other, err)
	}

	// Kill it through another server.
	if _, err := adminClient(t, c.Servers[li].GRPCAddr()).KillSession(ctx, &api.KillSessionRequest{Id: s.id}); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if _, err := adminClient(t, here.GRPCAddr()).KillSession(ctx, &api.KillSessionRequest{Id: s.id}); err == nil {
		t.Fatal("killing a closed session succeeded")
	}
	w := newSession(t, here.GRPCAddr())
	mustOK(t, w.sync())
	if r := w.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: "/e"}}}); r.Err != int32(vocab.NoNode) {
		t.Fatalf("the killed session's ephemeral: %v", vocab.Code(r.Err))
	}

	// The same digest everywhere at one index. A server answers at the
	// index it has applied, which may be past the one asked for (the log
	// moves on: session touches, expiry), so the digests are compared once
	// all three answered at the same index.
	idx := c.Servers[li].AppliedIndex()
	for try := 0; ; try++ {
		var digests [][]byte
		var at []uint64
		for _, srv := range c.Servers {
			h, err := adminClient(t, srv.GRPCAddr()).HashKV(ctx, &api.HashKVRequest{MinIndex: idx})
			if err != nil {
				t.Fatal(err)
			}
			if h.AppliedIndex < idx {
				t.Fatalf("%s answered at %d, below %d", h.Id, h.AppliedIndex, idx)
			}
			digests = append(digests, h.Digest)
			at = append(at, h.AppliedIndex)
		}
		if at[0] != at[1] || at[1] != at[2] {
			if try == 50 {
				t.Fatalf("no index at which all three answered in %d tries: %v", try+1, at)
			}
			t.Logf("answered at %v: again", at)
			idx = max(at[0], at[1], at[2])
			continue
		}
		for i := range digests {
			if !bytes.Equal(digests[i], digests[0]) {
				t.Fatalf("digests differ at index %d: %x", at[0], digests)
			}
		}
		break
	}

	// A saved snapshot restores to the digest its server answers at the
	// snapshot's index (taken between two HashKV calls that agree on it).
	var snapBytes, snapDigest []byte
	for try := 0; ; try++ {
		before, err := adminClient(t, here.GRPCAddr()).HashKV(ctx, &api.HashKVRequest{})
		if err != nil {
			t.Fatal(err)
		}
		snapBytes = saveSnapshot(t, ctx, here.GRPCAddr())
		after, err := adminClient(t, here.GRPCAddr()).HashKV(ctx, &api.HashKVRequest{})
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(bytes.NewReader(snapBytes))
		snapIndex, err := binary.ReadUvarint(br)
		if err != nil {
			t.Fatal(err)
		}
		if before.AppliedIndex != after.AppliedIndex || snapIndex != before.AppliedIndex {
			if try == 50 {
				t.Fatalf("the log kept moving: %d, snapshot at %d, %d", before.AppliedIndex, snapIndex, after.AppliedIndex)
			}
			continue
		}
		f := fsm.New()
		if err := f.Restore(br); err != nil {
			t.Fatalf("restoring the saved snapshot: %v", err)
		}
		if d := f.View().Digest(); !bytes.Equal(d[:], before.Digest) {
			t.Fatalf("the saved snapshot restores to digest %x, the server hashes %x at index %d", d, before.Digest, snapIndex)
		}
		snapDigest = before.Digest
		break
	}

	// Disaster recovery: a new one-server cluster from the saved file.
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, snapBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "r1")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RaftAddr = lis.Addr().String()
	lis.Close()
	cfg.DataDir = filepath.Join(t.TempDir(), "restored")
	idx2, digest, err := replica.RestoreDataDir(file, cfg.DataDir, "r1", cfg.RaftAddr, cfg.LogStore, cfg.Logger)
	if err != nil || !bytes.Equal(digest[:], snapDigest) || idx2 == 0 {
		t.Fatalf("restore: index %d digest %x err %v (want digest %x)", idx2, digest, err, snapDigest)
	}
	if _, _, err := replica.RestoreDataDir(file, cfg.DataDir, "r1", cfg.RaftAddr, cfg.LogStore, cfg.Logger); err == nil {
		t.Fatal("restored into a data directory that holds state")
	}
	if _, _, err := replica.RestoreDataDir(cfg.DataDir+"/raft.db", filepath.Join(t.TempDir(), "x"), "r1", cfg.RaftAddr, cfg.LogStore, cfg.Logger); err == nil {
		t.Fatal("restored from a file that is not a snapshot")
	}
	rc := emptyCluster(t)
	restored := rc.Start(cfg)
	rc.Leader()
	if d := restored.View().Digest(); !bytes.Equal(d[:], snapDigest) {
		t.Fatalf("the restored server's state has digest %x, want %x", d, snapDigest)
	}
	rs := newSession(t, restored.GRPCAddr())
	mustOK(t, rs.create("/after-restore", "x", vocab.ModePersistent))
}
