package fsm

// Stat is ZooKeeper's znode Stat, field for field and in wire order.
type Stat struct {
	Czxid          int64 // zxid of the create
	Mzxid          int64 // zxid of the last setData (or the create)
	Ctime          int64 // ms since the epoch, from the creating command
	Mtime          int64 // ms since the epoch, from the last modifying command
	Version        int32 // number of setData
	Cversion       int32 // child creates and deletes, as ZooKeeper reports it
	Aversion       int32 // number of setACL
	EphemeralOwner int64 // owning session of an ephemeral; 0 for every other kind
	DataLength     int32
	NumChildren    int32
	Pzxid          int64 // zxid of the last child create/delete
}

// Perm is a set of ZooKeeper ACL permission bits.
type Perm int32

// ZooKeeper's permission bits (ZooDefs.Perms).
const (
	PermRead   Perm = 1 << 0
	PermWrite  Perm = 1 << 1
	PermCreate Perm = 1 << 2
	PermDelete Perm = 1 << 3
	PermAdmin  Perm = 1 << 4
	PermAll    Perm = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// Id is an identity in an ACL or an authenticated identity of a caller:
// a scheme ("world", "auth", "digest", "ip", "super") and an id in it.
type Id struct {
	Scheme string
	ID     string
}

// ACL grants Perms to the identities matching ID.
type ACL struct {
	Perms Perm
	ID    Id
}

// Common ACLs (ZooDefs.Ids).
var (
	AnyoneID      = Id{Scheme: "world", ID: "anyone"}
	AuthIDs       = Id{Scheme: "auth", ID: ""}
	OpenACLUnsafe = []ACL{{Perms: PermAll, ID: AnyoneID}}
	CreatorAllACL = []ACL{{Perms: PermAll, ID: AuthIDs}}
	ReadACLUnsafe = []ACL{{Perms: PermRead, ID: AnyoneID}}
)

// CreateMode is ZooKeeper's create flag value.
type CreateMode int32

// ZooKeeper's CreateMode flags.
const (
	ModePersistent              CreateMode = 0
	ModeEphemeral               CreateMode = 1
	ModePersistentSequential    CreateMode = 2
	ModeEphemeralSequential     CreateMode = 3
	ModeContainer               CreateMode = 4
	ModePersistentTTL           CreateMode = 5
	ModePersistentSequentialTTL CreateMode = 6
)

// Valid reports whether m is one of ZooKeeper's create modes.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialTTL }

// IsSequential reports whether the server appends a sequence suffix.
func (m CreateMode) IsSequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialTTL
}

// IsEphemeral reports whether the node belongs to the creating session.
func (m CreateMode) IsEphemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// IsTTL reports whether the node is a TTL node.
func (m CreateMode) IsTTL() bool { return m == ModePersistentTTL || m == ModePersistentSequentialTTL }

// IsContainer reports whether the node is a container.
func (m CreateMode) IsContainer() bool { return m == ModeContainer }

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

// EventType is a watch trigger's type, with ZooKeeper's numeric values.
type EventType int32

const (
	EventNodeCreated         EventType = 1
	EventNodeDeleted         EventType = 2
	EventNodeDataChanged     EventType = 3
	EventNodeChildrenChanged EventType = 4
)

func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	}
	return "EventType(?)"
}

// Trigger is a change that fires watches: the server's watch registry turns
// it into events for the sessions watching Path.
type Trigger struct {
	Path string
	Type EventType
	Zxid int64
}
