package vocab

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
