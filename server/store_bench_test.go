package server

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// BenchmarkStoreLogs measures one raft log append (one bbolt transaction,
// fsynced) of n entries of 150 bytes: the disk step a write waits for on
// the leader and again on a follower.
func BenchmarkStoreLogs(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts *bbolt.Options
	}{
		{"default", nil},
		{"tuned", boltOptions()},
	} {
		for _, n := range []int{1, 64} {
			b.Run(bc.name+"/"+map[int]string{1: "1", 64: "64"}[n], func(b *testing.B) {
				store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), BoltOptions: bc.opts})
				if err != nil {
					b.Fatal(err)
				}
				defer store.Close()
				data := make([]byte, 150)
				idx := uint64(1)
				logs := make([]*raft.Log, n)
				for i := 0; i < b.N; i++ {
					for j := range logs {
						logs[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
						idx++
					}
					if err := store.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
