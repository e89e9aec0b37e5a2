package main

import (
	"coord/vocab"
	"path/filepath"
	"strings"
	"testing"
)

// A subtree whose nodes' ACLs deny what the import needs (CREATE for the
// children of /acl, READ of /acl/secret) imports for a caller who is not
// the superuser, with or without an identity of its own, and ends with
// exactly the exported ACLs and the same digest.
func TestImportRestrictiveACL(t *testing.T) {
	s := shared(t).grpcAddrs()
	su := func(args ...string) result {
		return ctl(t, s, "", append([]string{"--user", ctlAdminUser}, args...)...)
	}
	cleanup := func() {
		for _, r := range []string{"/acl", "/acl-copy", "/acl-copy2"} {
			if res := su("rm", "-r", r); res.code != 0 && res.code != exitNoNode {
				t.Fatalf("rm -r %s: %+v", r, res)
			}
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	other := "digest:" + vocab.DigestID("other", "pw")
	mustRun(t, s, "create", "/acl", "top")
	mustRun(t, s, "create", "-p", "/acl/ro/open", "o")
	mustRun(t, s, "create", "/acl/ro/c-only", "c")
	mustRun(t, s, "create", "/acl/ro/c-only/leaf", "l")
	mustRun(t, s, "create", "/acl/secret", "s")
	// Deepest first, as a restrictive ACL stops what comes after it.
	mustRun(t, s, "acl", "set", "/acl/secret", other+":cdrwa")
	mustRun(t, s, "acl", "set", "/acl/ro/c-only/leaf", "world:anyone:r")
	mustRun(t, s, "acl", "set", "/acl/ro/c-only", "world:anyone:c")
	mustRun(t, s, "acl", "set", "/acl/ro", "world:anyone:r,"+other+":cdrwa")
	mustRun(t, s, "acl", "set", "/acl", "world:anyone:r")

	file := filepath.Join(t.TempDir(), "acl.json")
	// Exporting reads everything: only the superuser may read /acl/secret.
	if r := su("export", "--file", file, "/acl"); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	want := strings.Fields(su("digest", "/acl").stdout)[0]
	check := func(root string) {
		t.Helper()
		if got := strings.Fields(su("digest", root).stdout)[0]; got != want {
			t.Fatalf("digest of %s: %s, want %s", root, got, want)
		}
		for rel, acl := range map[string]string{"": "world:anyone:r", "/ro": "world:anyone:r\n" + other + ":cdrwa",
			"/ro/c-only": "world:anyone:c", "/ro/c-only/leaf": "world:anyone:r", "/secret": other + ":cdrwa", "/ro/open": "world:anyone:cdrwa"} {
			if got := strings.TrimSpace(su("acl", "get", root+rel).stdout); got != acl {
				t.Fatalf("ACL of %s%s: %q, want %q", root, rel, got, acl)
			}
		}
	}
	// No identity: the temporary ACL is world:anyone's.
	if out := mustRun(t, s, "import", "--to", "/acl-copy", file); out != "Imported 6 nodes to /acl-copy ("+want+")\n" {
		t.Fatalf("import: %q", out)
	}
	check("/acl-copy")
	// With an identity (not the superuser): the temporary ACL is its own.
	if out := mustRun(t, s, "--user", "alice:pw", "import", "--to", "/acl-copy2", file); !strings.HasPrefix(out, "Imported 6 nodes") {
		t.Fatalf("import --user alice: %q", out)
	}
	check("/acl-copy2")
}
