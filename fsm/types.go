package fsm

import "coord/vocab"

// Ephemeral owner encodings for the extended node types (EphemeralType in
// ZooKeeper): containers carry ContainerOwner; TTL nodes carry
// ttlOwnerMask|ttl with the ttl in the low 40 bits.
const (
	ContainerOwner int64 = -1 << 63 // 0x8000000000000000
	ttlOwnerMask   int64 = -1 << 56 // 0xff00000000000000
	MaxTTL         int64 = 1<<40 - 1
)

// TTLOwner encodes ttl (ms) as a TTL node's ephemeralOwner.
func TTLOwner(ttl int64) int64 { return ttlOwnerMask | ttl }

// OwnerKind tells what an ephemeralOwner value means.
type OwnerKind uint8

const (
	OwnerNone      OwnerKind = iota // persistent
	OwnerSession                    // ephemeral, owned by a session
	OwnerContainer                  // container node
	OwnerTTL                        // TTL node
)

// KindOfOwner decodes an ephemeralOwner value.
func KindOfOwner(owner int64) (OwnerKind, int64) {
	switch {
	case owner == 0:
		return OwnerNone, 0
	case owner == ContainerOwner:
		return OwnerContainer, 0
	case owner&ttlOwnerMask == ttlOwnerMask:
		return OwnerTTL, owner & MaxTTL
	}
	return OwnerSession, owner
}

// Trigger is a change that fires watches: the server's watch registry turns
// it into events for the sessions watching Path.
type Trigger struct {
	Path string
	Type vocab.EventType
	Zxid int64
	// ACL decides who may be told (ZooKeeper since CVE-2024-23944): only a
	// session whose identities have READ on it. It is the node's ACL at the
	// change for the node's own events (a deleted node's last ACL), the
	// parent's for NodeChildrenChanged. Shared, never to be modified.
	ACL []vocab.ACL
}
