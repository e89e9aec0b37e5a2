package server

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"

	"coord/api"
	"coord/vocab"
)

// failingLogStore fails every append while failing is set, as a disk that
// returns I/O errors does.
type failingLogStore struct {
	raft.LogStore
	failing atomic.Bool
	failed  atomic.Int64
}

func (f *failingLogStore) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *failingLogStore) StoreLogs(logs []*raft.Log) error {
	if f.failing.Load() {
		f.failed.Add(1)
		return errors.New("injected: input/output error")
	}
	return f.LogStore.StoreLogs(logs)
}

// Config.Stores replaces the raft stores under DataDir. With a log store
// that fails its appends, a write is not acknowledged (the client loses its
// connection, as with ZooKeeper when its leader's disk fails) and leaves
// nothing behind; once the store works again the server takes writes, and
// what was acknowledged before is all there.
func TestInjectedStoresAndAFailingLog(t *testing.T) {
	t.Parallel()
	mem := raft.NewInmemStore()
	logs := &failingLogStore{LogStore: mem}
	c := NewTestClusterWith(t, 1, 0, func(cfg *Config) {
		cfg.Stores = &Stores{Log: logs, Stable: mem, Snapshots: raft.NewInmemSnapshotStore()}
	})
	srv := c.Servers[0]
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/kept", "v", vocab.ModePersistent))
	if _, err := os.Stat(filepath.Join(c.Configs[0].DataDir, "raft.db")); !os.IsNotExist(err) {
		t.Fatalf("raft.db in the data directory with stores handed in (stat: %v)", err)
	}

	logs.failing.Store(true)
	r, err := s.tryDo(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: "/lost", Data: []byte("x"),
		Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}})
	if err == nil && r.Err != int32(vocab.ConnectionLoss) {
		t.Fatalf("a write whose append failed was answered %v, want ConnectionLoss", vocab.Code(r.Err))
	}
	if logs.failed.Load() == 0 {
		t.Fatal("the log store was never asked to append the write")
	}
	logs.failing.Store(false)

	c.Leader() // raft stepped down on the failed append; it takes over again
	again := newSession(t, srv.GRPCAddr())
	exists := func(path string) *api.Response {
		return again.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: path}}})
	}
	if r := exists("/lost"); r.Err != int32(vocab.NoNode) {
		t.Fatalf("/lost after its append failed: %v, want NoNode", vocab.Code(r.Err))
	}
	mustOK(t, exists("/kept"))
	mustOK(t, again.create("/after", "v", vocab.ModePersistent))
}
