package compat

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Every operation against a node (or, for create and delete, its parent)
// whose ACL grants one permission to one id (world, digest, ip matching
// and not matching), from an anonymous session and a digest-authenticated
// one: the answer is OK exactly when the ACL grants the operation's
// permission to one of the session's ids, and NoAuth otherwise, on coord
// as on ZooKeeper (the same table runs against both: 4 ids × 5 permissions
// × 8 operations × 2 sessions).
func TestACLTable(t *testing.T) {
	cl := newCluster(t, 1)
	admin := connect(t, "admin", cl.Addrs(), clientOpts{})
	must(t, "auth admin", admin.AddAuth("digest", []byte("admin:pw")))
	adminACL := zk.DigestACL(zk.PermAll, "admin", "pw")

	anon := connect(t, "anon", cl.Addrs(), clientOpts{})
	bob := connect(t, "bob", cl.Addrs(), clientOpts{})
	must(t, "auth bob", bob.AddAuth("digest", []byte("bob:pw")))
	sessions := []struct {
		name string
		c    *client
	}{{"anon", anon}, {"bob", bob}}

	grantees := []struct {
		name string
		id   func(perm int32) zk.ACL
		gets map[string]bool // which sessions the id matches
	}{
		{"world", func(p int32) zk.ACL { return zk.WorldACL(p)[0] }, map[string]bool{"anon": true, "bob": true}},
		{"digest-bob", func(p int32) zk.ACL { return zk.DigestACL(p, "bob", "pw")[0] }, map[string]bool{"bob": true}},
		{"ip-loopback", func(p int32) zk.ACL { return zk.ACL{Perms: p, Scheme: "ip", ID: "127.0.0.1"} }, map[string]bool{"anon": true, "bob": true}},
		{"ip-other", func(p int32) zk.ACL { return zk.ACL{Perms: p, Scheme: "ip", ID: "10.0.0.0/8"} }, map[string]bool{}},
	}
	perms := []struct {
		name string
		p    int32
	}{{"r", zk.PermRead}, {"w", zk.PermWrite}, {"c", zk.PermCreate}, {"d", zk.PermDelete}, {"a", zk.PermAdmin}}

	// An op and the permissions it needs on the node it names, any one of
	// them (create and delete: on the parent, which is the node under test;
	// getACL: READ or ADMIN, as ZooKeeper 3.8 checks it; exists: none).
	type op struct {
		name string
		need int32
		run  func(c *client, node string) error
	}
	ops := []op{
		{"getData", zk.PermRead, func(c *client, n string) error { _, _, err := c.Get(n); return err }},
		{"getChildren", zk.PermRead, func(c *client, n string) error { _, _, err := c.Children(n); return err }},
		{"setData", zk.PermWrite, func(c *client, n string) error { _, err := c.Set(n, []byte("x"), -1); return err }},
		{"create", zk.PermCreate, func(c *client, n string) error {
			_, err := c.Create(n+"/new", nil, 0, zk.WorldACL(zk.PermAll))
			return err
		}},
		{"delete", zk.PermDelete, func(c *client, n string) error { return c.Delete(n+"/kid", -1) }},
		{"setACL", zk.PermAdmin, func(c *client, n string) error { _, err := c.SetACL(n, zk.WorldACL(zk.PermAll), -1); return err }},
		{"getACL", zk.PermRead | zk.PermAdmin, func(c *client, n string) error { _, _, err := c.GetACL(n); return err }},
		{"exists", 0, func(c *client, n string) error { _, _, err := c.Exists(n); return err }},
	}

	var mismatches []string
	for _, g := range grantees {
		for _, pm := range perms {
			for _, o := range ops {
				for _, s := range sessions {
					node := fmt.Sprintf("/t-%s-%s-%s-%s", g.name, pm.name, o.name, s.name)
					if _, err := admin.Create(node, []byte("d"), 0, append([]zk.ACL{g.id(pm.p)}, adminACL...)); err != nil {
						t.Fatalf("create %s: %v", node, err)
					}
					if _, err := admin.Create(node+"/kid", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
						t.Fatalf("create %s/kid: %v", node, err)
					}
					err := o.run(s.c, node)
					allowed := o.need == 0 || (pm.p&o.need != 0 && g.gets[s.name])
					switch {
					case allowed && err != nil:
						mismatches = append(mismatches, fmt.Sprintf("%s by %s on ACL %s:%s: %v, want OK", o.name, s.name, g.name, pm.name, err))
					case !allowed && !errors.Is(err, zk.ErrNoAuth):
						mismatches = append(mismatches, fmt.Sprintf("%s by %s on ACL %s:%s: %v, want NoAuth", o.name, s.name, g.name, pm.name, err))
					}
				}
			}
		}
	}
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases differ from the ACL rules:\n%s", len(mismatches),
			len(grantees)*len(perms)*len(ops)*len(sessions), strings.Join(mismatches, "\n"))
	}
}
