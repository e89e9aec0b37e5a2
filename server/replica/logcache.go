package replica

import (
	"sync"

	"github.com/hashicorp/raft"
)

// Bounds of the cache of recent raft entries: the leader reads entries back
// to replicate them and every server's applier reads those it just stored,
// and both nearly always want the last few.
const (
	logCacheEntries = 4096
	logCacheBytes   = 8 << 20
	// storeChunkBytes bounds the data of one append to the store: raft-wal's
	// segment writer grows its buffer to the largest append it was handed
	// and keeps it until the segment rotates, and a follower is handed
	// whole AppendEntries batches (up to 1024 entries), 132 MB of buffer
	// after a load of 1 MB values. A batch is stored in chunks of at most
	// this much (at least one entry each); a stored prefix of a batch is a
	// valid log for raft.
	storeChunkBytes = 4 << 20
)

// logCache keeps the most recent raft entries in memory in front of the log
// store, bounded by count and by the bytes of their data. hashicorp/raft's
// LogCache bounds only the count, so it held 4096 entries of whatever size:
// with batching (an entry carries up to a few hundred commands) that was
// ~38 MB on a leader after a load of small creates, and gigabytes for
// megabyte-sized writes. An entry larger than the byte bound is still
// cached, alone.
type logCache struct {
	raft.LogStore

	mu          sync.RWMutex
	ring        []*raft.Log // entry i at i % len(ring)
	maxBytes    int
	bytes       int
	first, last uint64 // the cached entries are first..last; 0, 0 when none
}

func newLogCache(store raft.LogStore, entries, maxBytes int) *logCache {
	return &logCache{LogStore: store, ring: make([]*raft.Log, entries), maxBytes: maxBytes}
}

func (c *logCache) GetLog(index uint64, l *raft.Log) error {
	c.mu.RLock()
	if index >= c.first && index <= c.last && c.first != 0 {
		if cached := c.ring[index%uint64(len(c.ring))]; cached != nil && cached.Index == index {
			*l = *cached
			c.mu.RUnlock()
			return nil
		}
	}
	c.mu.RUnlock()
	return c.LogStore.GetLog(index, l)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	for len(logs) > 0 {
		n, size := 1, len(logs[0].Data)
		for n < len(logs) && size+len(logs[n].Data) <= storeChunkBytes {
			size += len(logs[n].Data)
			n++
		}
		if err := c.storeChunk(logs[:n]); err != nil {
			return err
		}
		logs = logs[n:]
	}
	return nil
}

func (c *logCache) storeChunk(logs []*raft.Log) error {
	err := c.LogStore.StoreLogs(logs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// What reached the store is unknown: cache nothing stale.
		c.reset()
		return err
	}
	for _, l := range logs {
		c.add(l)
	}
	return nil
}

// add caches l, the entry after the last cached one (otherwise the cache
// starts again from l), and evicts the oldest entries beyond the bounds.
func (c *logCache) add(l *raft.Log) {
	if c.first != 0 && l.Index != c.last+1 {
		c.reset()
	}
	n := uint64(len(c.ring))
	if c.first != 0 && l.Index-c.first >= n {
		c.evictFirst() // its slot is l's
	}
	c.ring[l.Index%n] = l
	c.bytes += len(l.Data)
	c.last = l.Index
	if c.first == 0 {
		c.first = l.Index
	}
	for c.bytes > c.maxBytes && c.first < c.last {
		c.evictFirst()
	}
}

func (c *logCache) evictFirst() {
	slot := c.first % uint64(len(c.ring))
	if e := c.ring[slot]; e != nil {
		c.bytes -= len(e.Data)
		c.ring[slot] = nil
	}
	c.first++
}

func (c *logCache) reset() {
	clear(c.ring)
	c.bytes, c.first, c.last = 0, 0, 0
}

func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.reset()
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}

// IsMonotonic passes on the store's (raft.MonotonicLogStore).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
