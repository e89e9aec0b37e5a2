package replica

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// BenchmarkStoreLogs measures one raft log append (fsynced) of n entries of
// 150 bytes, on bbolt (raft-boltdb with its defaults and with coord's
// options) and on raft-wal: the disk step a write waits for on
// the leader and again on a follower.
func BenchmarkStoreLogs(b *testing.B) {
	for _, bc := range []struct {
		name string
		open func(dir string) (raft.LogStore, io.Closer, error)
	}{
		{"bolt-default", func(dir string) (raft.LogStore, io.Closer, error) {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
			return s, s, err
		}},
		{"bolt", func(dir string) (raft.LogStore, io.Closer, error) {
			s, _, c, _, err := openLogStore(dir, LogStoreBolt, slog.New(slog.DiscardHandler))
			return s, c, err
		}},
		{"wal", func(dir string) (raft.LogStore, io.Closer, error) {
			s, _, c, _, err := openLogStore(dir, LogStoreWAL, slog.New(slog.DiscardHandler))
			return s, c, err
		}},
	} {
		for _, n := range []int{1, 64} {
			b.Run(bc.name+"/"+map[int]string{1: "1", 64: "64"}[n], func(b *testing.B) {
				store, closer, err := bc.open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer closer.Close()
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
