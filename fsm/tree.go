package fsm

import (
	"strconv"
	"strings"
	"unsafe"

	"coord/vocab"
	"coord/zxid"
)

// znode is one node of the tree. Like the btree nodes, a znode belongs to the
// generation that made it and is copied before a later generation changes it.
// Its name is not stored here: it is the key under which its parent holds it.
//
// The data is held as a string (a 16-byte header where a slice takes 24)
// with a flag for null data, which ZooKeeper tells apart from empty data:
// with the flag in the int32s' padding a znode fits the 112-byte size
// class instead of 128, for every znode of a large tree.
type znode struct {
	gen      uint64
	data     string
	acl      *aclList
	kids     btree[string, *znode]
	czxid    int64
	mzxid    int64
	pzxid    int64
	ctime    int64
	mtime    int64
	owner    int64
	version  int32
	cversion int32
	aversion int32
	nullData bool
}

// setData stores a copy of b (nil stays null data).
func (n *znode) setData(b []byte) {
	n.data, n.nullData = string(b), b == nil
}

// emptyData is what bytes returns for empty, non-null data.
var emptyData = []byte{}

// bytes returns the node's data without copying it: the slice shares the
// tree's memory, which nothing may change (a view returns it to readers,
// who only encode it). Null data is nil, empty data a non-nil empty slice.
func (n *znode) bytes() []byte {
	switch {
	case n.nullData:
		return nil
	case n.data == "":
		return emptyData
	}
	return unsafe.Slice(unsafe.StringData(n.data), len(n.data))
}

func (n *znode) mut(g uint64) *znode {
	if n.gen == g {
		return n
	}
	c := *n
	c.gen = g
	return &c
}

// stat is the Stat a client sees, which is not quite what is stored, as in
// ZooKeeper's DataNode.copyStat: the stored cversion counts child creates
// (sequential suffixes come from it) while the reported one counts creates
// and deletes, 2*creates - children; and containers and TTL nodes report an
// ephemeralOwner of 0.
func (n *znode) stat() vocab.Stat {
	kids := int32(n.kids.Len())
	owner := n.owner
	if kind, _ := KindOfOwner(owner); kind != OwnerSession {
		owner = 0
	}
	return vocab.Stat{
		Czxid: n.czxid, Mzxid: n.mzxid, Ctime: n.ctime, Mtime: n.mtime,
		Version: n.version, Cversion: n.cversion*2 - kids, Aversion: n.aversion,
		EphemeralOwner: owner, DataLength: int32(len(n.data)),
		NumChildren: kids, Pzxid: n.pzxid,
	}
}

// session is one entry of the replicated session table.
type session struct {
	gen        uint64
	id         int64
	timeout    int32
	password   []byte
	owner      string                  // the connection the session belongs to
	ephemerals btree[string, struct{}] // paths of the session's ephemeral nodes
}

func (s *session) mut(g uint64) *session {
	if s.gen == g {
		return s
	}
	c := *s
	c.gen = g
	return &c
}

// state is the whole replicated state. Copying the struct while the writer
// is between commands and then bumping the writer's generation yields an
// immutable view of it.
type state struct {
	root       *znode
	sessions   btree[int64, *session]
	containers btree[string, struct{}] // paths of container nodes
	ttls       btree[string, struct{}] // paths of TTL nodes
	clock      zxid.Clock
	nodes      int // znodes including the root
}

// The nodes ZooKeeper always has.
const (
	procPath   = "/zookeeper"
	quotaPath  = "/zookeeper/quota"
	configPath = "/zookeeper/config"
)

// isSpecialPath reports the nodes that can never be deleted.
func isSpecialPath(p string) bool {
	return p == "/" || p == procPath || p == quotaPath || p == configPath
}

func newState(g uint64, acls *aclTable) state {
	open := acls.intern(vocab.OpenACLUnsafe)
	// ZooKeeper sets the config node's ACL with version -1, which it stores
	// as the aversion.
	config := &znode{gen: g, acl: acls.intern(vocab.ReadACLUnsafe), aversion: -1}
	quota := &znode{gen: g, acl: open}
	proc := &znode{gen: g, acl: open}
	proc.kids.Set(g, "config", config)
	proc.kids.Set(g, "quota", quota)
	root := &znode{gen: g, acl: open}
	root.kids.Set(g, "zookeeper", proc)
	return state{root: root, nodes: 4}
}

// lookup finds the node at path without changing anything. Anything that
// does not name a node, malformed paths included, is not found; "" is the
// root, as in ZooKeeper.
func (s *state) lookup(path string) *znode {
	if path == "/" || path == "" {
		return s.root
	}
	if path[0] != '/' {
		return nil
	}
	n := s.root
	rest := path[1:]
	for n != nil {
		seg, tail, more := strings.Cut(rest, "/")
		c, ok := n.kids.Get(seg)
		if !ok {
			return nil
		}
		if !more {
			return c
		}
		n, rest = c, tail
	}
	return nil
}

// mutLookup returns a writable copy of the node at the (existing, valid) path,
// copying it and its ancestors into generation g as needed.
func (s *state) mutLookup(g uint64, path string) *znode {
	s.root = s.root.mut(g)
	n := s.root
	if path == "/" {
		return n
	}
	rest := path[1:]
	for {
		seg, tail, more := strings.Cut(rest, "/")
		c, ok := n.kids.Get(seg)
		if !ok {
			panic("fsm: mutLookup of missing path " + path)
		}
		if c.gen != g {
			c = c.mut(g)
			n.kids.Set(g, seg, c)
		}
		if !more {
			return c
		}
		n, rest = c, tail
	}
}

// splitPath returns the parent path and the last segment of a path that has
// a '/' in it ("/a" gives "/" and "a").
func splitPath(path string) (parent, name string) {
	i := strings.LastIndexByte(path, '/')
	parent, name = path[:i], path[i+1:]
	if parent == "" {
		parent = "/"
	}
	return parent, name
}

// sequenceSuffix formats a parent's cversion as ZooKeeper's sequential
// suffix, String.format("%010d", cversion): zero-padded to ten characters,
// a minus sign counting towards the width.
func sequenceSuffix(cversion int32) string {
	if cversion < 0 {
		s := strconv.Itoa(int(-int64(cversion)))
		if len(s) < 9 {
			s = strings.Repeat("0", 9-len(s)) + s
		}
		return "-" + s
	}
	var b [10]byte
	v := uint32(cversion)
	for i := 9; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[:])
}
