package vocab

import (
	"crypto/sha1"
	"encoding/base64"
	"strings"
)

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

// DigestID returns the digest-scheme id ZooKeeper derives for user and
// password: user + ":" + base64(sha1(user + ":" + password)), the form used
// in "digest" ACL entries and in the super-user digest setting. For example
// DigestID("super", "test") is "super:D/InIHSb7yEEbrWz8b9l71RjZJU=". Like
// ZooKeeper's generateDigest it works on the joined string, so a user name
// containing ':' is cut at its first ':' (the hash still covers all of it),
// exactly as the server would for a client authenticating with them.
func DigestID(user, password string) string {
	return Digest(user + ":" + password)
}

// Digest is the digest-scheme id of a "user:password" credential (a
// digest auth packet's payload, coordctl's --user): the user part up to
// the first ':', then ':' and base64(sha1(credential)). A credential
// without ':' is all user name, and the hash covers it alone.
func Digest(credential string) string {
	user, _, _ := strings.Cut(credential, ":")
	sum := sha1.Sum([]byte(credential))
	var enc [28]byte // base64 of 20 bytes
	base64.StdEncoding.Encode(enc[:], sum[:])
	return user + ":" + string(enc[:])
}
