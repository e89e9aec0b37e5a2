package vocab

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// The export file: a subtree as coordctl's export writes it and its import
// (and the console's) reads it, and ACLs as text, as zkCli.sh writes them.

// ExportFormat names the export file's layout; import refuses others.
const ExportFormat = "coordctl-export/1"

// ExportFile is a subtree: its root's path and its nodes, parents first,
// with paths relative to the root ("" is the root itself).
type ExportFile struct {
	Format string       `json:"format"`
	Root   string       `json:"root"`
	Digest string       `json:"digest"`
	Nodes  []ExportNode `json:"nodes"`
}

// ExportNode is one node of an export.
type ExportNode struct {
	Path  string    `json:"path"`
	Data  []byte    `json:"data,omitempty"` // base64
	ACL   []ACLText `json:"acl"`
	Mode  string    `json:"mode"` // persistent, container or persistent_ttl
	TTLms int64     `json:"ttl_ms,omitempty"`
}

// ACLText is one ACL entry as text: perms a subset of "cdrwa" (create,
// delete, read, write, admin), in that order.
type ACLText struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

var permLetters = []struct {
	letter byte
	perm   Perm
}{{'c', PermCreate}, {'d', PermDelete}, {'r', PermRead}, {'w', PermWrite}, {'a', PermAdmin}}

// PermString is p as letters of "cdrwa", in that order.
func PermString(p Perm) string {
	var b strings.Builder
	for _, l := range permLetters {
		if p&l.perm != 0 {
			b.WriteByte(l.letter)
		}
	}
	return b.String()
}

// ParsePerms reads letters of "cdrwa" in any order.
func ParsePerms(s string) (Perm, error) {
	var p Perm
	for i := 0; i < len(s); i++ {
		found := false
		for _, l := range permLetters {
			if s[i] == l.letter {
				p |= l.perm
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("permission %q: want letters of cdrwa", s[i])
		}
	}
	return p, nil
}

// ACLsText is acl as text entries.
func ACLsText(acl []ACL) []ACLText {
	out := make([]ACLText, 0, len(acl))
	for _, a := range acl {
		out = append(out, ACLText{Scheme: a.ID.Scheme, ID: a.ID.ID, Perms: PermString(a.Perms)})
	}
	return out
}

// ACLsFromText reads text entries back.
func ACLsFromText(in []ACLText) ([]ACL, error) {
	out := make([]ACL, 0, len(in))
	for _, a := range in {
		p, err := ParsePerms(a.Perms)
		if err != nil {
			return nil, err
		}
		out = append(out, ACL{Perms: p, ID: Id{Scheme: a.Scheme, ID: a.ID}})
	}
	return out, nil
}

// The ephemeralOwner encodings of containers and TTL nodes (ZooKeeper's
// EphemeralType, as the server reports them in getData's kind).
const (
	ContainerOwner int64 = -1 << 63
	ttlOwnerMask   int64 = -1 << 56
	maxTTL         int64 = 1<<40 - 1
)

// NodeKind decodes an ephemeralOwner (with a container's or TTL node's
// owner as getData's kind reports it, since Stat shows 0 for them): the
// mode an export records and the TTL, or ok false for an ephemeral (which
// belongs to a live session and is not exported).
func NodeKind(owner int64) (mode string, ttl int64, ok bool) {
	switch {
	case owner == 0:
		return "persistent", 0, true
	case owner == ContainerOwner:
		return "container", 0, true
	case owner&ttlOwnerMask == ttlOwnerMask:
		return "persistent_ttl", owner & maxTTL, true
	}
	return "", 0, false
}

// RelPath is p relative to root: "" for the root, "/a/b" below it.
func RelPath(root, p string) string {
	if root == "/" {
		if p == "/" {
			return ""
		}
		return p
	}
	return strings.TrimPrefix(p, root)
}

// JoinRel is RelPath's inverse.
func JoinRel(root, rel string) string {
	if root == "/" {
		if rel == "" {
			return "/"
		}
		return rel
	}
	return root + rel
}

// ExportDigest hashes what an export carries of each node (relative path,
// data, ACL, mode, TTL), in path order, whatever the order of nodes: two
// subtrees with the same digest hold the same nodes, whatever their roots,
// zxids and times.
func ExportDigest(nodes []ExportNode) string {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b ExportNode) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, nd := range nodes {
		field([]byte(nd.Path))
		field(nd.Data)
		field([]byte(nd.Mode))
		binary.BigEndian.PutUint64(n[:], uint64(nd.TTLms))
		h.Write(n[:])
		for _, a := range nd.ACL {
			field([]byte(a.Scheme + ":" + a.ID + ":" + a.Perms))
		}
		field(nil)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
