package replica

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// readCountingStore counts the reads that reach the store.
type readCountingStore struct {
	*raft.InmemStore
	reads int
}

func (s *readCountingStore) GetLog(i uint64, l *raft.Log) error {
	s.reads++
	return s.InmemStore.GetLog(i, l)
}

func entry(i uint64, size int) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)}
}

// TestLogCacheBoundedInBytes: the cache holds recent entries up to its byte
// bound (it held 4096 entries of any size before), serves them without a
// store read, and falls through to the store for evicted ones.
func TestLogCacheBoundedInBytes(t *testing.T) {
	store := &readCountingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(store, 64, 10_000)
	for i := uint64(1); i <= 100; i++ {
		if err := c.StoreLogs([]*raft.Log{entry(i, 1000)}); err != nil {
			t.Fatal(err)
		}
		if b := c.cachedBytes(); b > 10_000 {
			t.Fatalf("after entry %d the cache holds %d bytes, more than its 10000", i, b)
		}
	}
	if b := c.cachedBytes(); b != 10_000 {
		t.Fatalf("the cache holds %d bytes of the last entries, want 10000", b)
	}
	var l raft.Log
	for i := uint64(91); i <= 100; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("GetLog(%d) = %v, %d", i, err, l.Index)
		}
	}
	if store.reads != 0 {
		t.Fatalf("%d reads of recent entries reached the store", store.reads)
	}
	if err := c.GetLog(50, &l); err != nil || l.Index != 50 || l.Data[0] != 50 {
		t.Fatalf("GetLog(50) of an evicted entry = %v, %d", err, l.Index)
	}
	if store.reads != 1 {
		t.Fatalf("an evicted entry was read %d times from the store, want 1", store.reads)
	}

	// A single entry above the bound is cached alone.
	if err := c.StoreLogs([]*raft.Log{entry(101, 50_000)}); err != nil {
		t.Fatal(err)
	}
	if b := c.cachedBytes(); b != 50_000 {
		t.Fatalf("after a 50000-byte entry the cache holds %d bytes", b)
	}
	// The count bound holds too.
	for i := uint64(102); i <= 300; i++ {
		if err := c.StoreLogs([]*raft.Log{entry(i, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if b := c.cachedBytes(); b != 64 {
		t.Fatalf("64 one-byte entries in a 64-entry cache hold %d bytes", b)
	}

	// A truncation (raft's DeleteRange) empties the cache; entries stored
	// after it with earlier indexes (a new leader's) replace the old ones.
	if err := c.DeleteRange(250, 300); err != nil {
		t.Fatal(err)
	}
	if b := c.cachedBytes(); b != 0 {
		t.Fatalf("after DeleteRange the cache holds %d bytes", b)
	}
	repl := entry(250, 7)
	repl.Term = 2
	if err := c.StoreLogs([]*raft.Log{repl}); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(250, &l); err != nil || l.Term != 2 {
		t.Fatalf("GetLog(250) after the truncation = %v, term %d, want term 2", err, l.Term)
	}
	if err := c.GetLog(260, &l); err == nil {
		t.Fatalf("GetLog(260) after the truncation found entry %d", l.Index)
	}
}

// batchStore records the data bytes of each StoreLogs call.
type batchStore struct {
	*raft.InmemStore
	batches []int
}

func (s *batchStore) StoreLogs(logs []*raft.Log) error {
	n := 0
	for _, l := range logs {
		n += len(l.Data)
	}
	s.batches = append(s.batches, n)
	return s.InmemStore.StoreLogs(logs)
}

// TestLogCacheStoresLargeBatchesInChunks: a batch of large entries reaches
// the store in appends of at most storeChunkBytes (or one entry), all of
// it, in order; small batches go through whole.
func TestLogCacheStoresLargeBatchesInChunks(t *testing.T) {
	store := &batchStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(store, 64, 1<<20)
	var big []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		big = append(big, entry(i, 1<<20))
	}
	big = append(big, entry(41, 9<<20)) // one entry above the bound goes alone
	if err := c.StoreLogs(big); err != nil {
		t.Fatal(err)
	}
	for _, b := range store.batches[:len(store.batches)-1] {
		if b > storeChunkBytes {
			t.Fatalf("an append of %d bytes reached the store (bound %d): %v", b, storeChunkBytes, store.batches)
		}
	}
	if last := store.batches[len(store.batches)-1]; last != 9<<20 {
		t.Fatalf("the 9 MiB entry went in an append of %d bytes", last)
	}
	if got, _ := store.LastIndex(); got != 41 {
		t.Fatalf("the store's last index is %d after the batch, want 41", got)
	}
	var l raft.Log
	for i := uint64(1); i <= 41; i++ {
		if err := store.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("entry %d not stored: %v", i, err)
		}
	}
	store.batches = nil
	var small []*raft.Log
	for i := uint64(42); i <= 1065; i++ {
		small = append(small, entry(i, 150))
	}
	if err := c.StoreLogs(small); err != nil {
		t.Fatal(err)
	}
	if len(store.batches) != 1 {
		t.Fatalf("1024 entries of 150 bytes went in %d appends, want 1", len(store.batches))
	}
}

// cachedBytes reports the data bytes the cache holds.
func (c *logCache) cachedBytes() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytes
}
