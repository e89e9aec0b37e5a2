package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A malformed path is a usage error (exit 2) with zkCli.sh's words, found
// before any server is contacted: none listens at the address given.
func TestPathUsage(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "hello"}, `path "hello": must start with / character`},
		{[]string{"ls", "//a"}, `path "//a": empty node name specified`},
		{[]string{"set", "/a/", "x"}, `path "/a/": must not end with / character`},
		{[]string{"create", "/a/./b"}, `path "/a/./b": relative paths not allowed`},
		{[]string{"rm", "-r", "/a/.."}, `path "/a/..": relative paths not allowed`},
		{[]string{"acl", "set", "a", "world:anyone:r"}, `path "a": must start with / character`},
		{[]string{"stat", "/a\x01"}, `path "/a\x01": invalid character`},
		{[]string{"import", "--to", "app", "-"}, `path "app": must start with / character`},
	} {
		r := fails(t, dead, exitUsage, c.args...)
		if !strings.HasPrefix(r.stderr, "coordctl: "+c.want) {
			t.Errorf("coordctl %q: %q, want %q", c.args, r.stderr, c.want)
		}
	}
	// A sequential create names children of a prefix ending in /.
	if r := ctl(t, dead, "", "create", "-s", "/queue/"); r.code != exitUnreachable {
		t.Errorf("create -s /queue/: %+v", r)
	}
}

// Shell completion of znode paths (cobra's __complete, as the shell
// scripts call it) lists the children of the typed prefix's parent; with
// no server it offers nothing, soon.
func TestCompletePath(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/cmpl")
	for _, p := range []string{"/cmpl", "/cmpl/app", "/cmpl/apple", "/cmpl/base"} {
		mustRun(t, s, "create", p)
	}
	const more = ":6\n" // ShellCompDirectiveNoSpace | NoFileComp: the path may go on
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "/cmpl/ap"}, "/cmpl/app\n/cmpl/apple\n" + more},
		{[]string{"acl", "set", "/cmpl/"}, "/cmpl/app\n/cmpl/apple\n/cmpl/base\n" + more},
		{[]string{"ls", "-R", "/cmp"}, "/cmpl\n" + more},
		{[]string{"create", "-p", "/cmpl/b"}, "/cmpl/base\n" + more},
		{[]string{"rm", "/cmpl/nope/"}, ":4\n"},    // NoFileComp: an error offers nothing
		{[]string{"set", "/cmpl/app", ""}, ":4\n"}, // the data is not a path
	} {
		r := ctl(t, s, "", append([]string{"__complete"}, c.args...)...)
		if r.code != 0 || r.stdout != c.want {
			t.Errorf("__complete %q: exit %d, %q, want %q (stderr %q)", c.args, r.code, r.stdout, c.want, r.stderr)
		}
	}
	dead := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	start := time.Now()
	if r := ctl(t, dead, "", "__complete", "get", "/"); r.stdout != ":4\n" {
		t.Errorf("__complete with no server: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("__complete with no server took %v", d)
	}
}
