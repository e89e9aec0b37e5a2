package recipes_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"coord/recipes"
	"coord/vocab"
)

// until waits for cond, re-checking it at every change of a cache.
func until(t testing.TB, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestNodeCache(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		ctx := ctxT(t)
		root := testRoot(t)
		path := root + "/node"
		if _, err := cs[1].Create(ctx, root, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
			t.Fatal(err)
		}
		nc, err := recipes.NewNodeCache(ctx, cs[0], path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close(ctx)
		t.Logf("persistent watch: %v", nc.Persistent())
		if want := c.Name() == "coord"; nc.Persistent() != want {
			t.Errorf("persistent = %v on %s", nc.Persistent(), c.Name())
		}
		if _, _, ok := nc.Current(); ok {
			t.Fatal("a missing node is cached as existing")
		}
		if _, err := cs[1].Create(ctx, path, []byte("v1"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
			t.Fatal(err)
		}
		until(t, "v1", nc.Changed, func() bool { d, _, ok := nc.Current(); return ok && string(d) == "v1" })
		for i := 2; i <= 5; i++ {
			if _, err := cs[1].Set(ctx, path, []byte(fmt.Sprint("v", i)), recipes.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		until(t, "v5", nc.Changed, func() bool { d, st, ok := nc.Current(); return ok && string(d) == "v5" && st.Version == 4 })
		if err := cs[1].Delete(ctx, path, recipes.AnyVersion); err != nil {
			t.Fatal(err)
		}
		until(t, "deletion", nc.Changed, func() bool { _, _, ok := nc.Current(); return !ok })
		if _, err := cs[1].Create(ctx, path, []byte("again"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
			t.Fatal(err)
		}
		until(t, "re-creation", nc.Changed, func() bool { d, _, ok := nc.Current(); return ok && string(d) == "again" })
	})
}

func TestTreeCache(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		ctx := ctxT(t)
		root := testRoot(t)
		mkOn := func(c recipes.Conn, p, d string) {
			t.Helper()
			if _, err := c.Create(ctx, p, []byte(d), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
				t.Fatal(err)
			}
		}
		mk := func(p, d string) { t.Helper(); mkOn(cs[1], p, d) }
		// The initial tree is made on the cache's own session: another
		// session's writes may not have reached the cache's server yet
		// (ZooKeeper orders a session's own reads after its writes only).
		mkOn(cs[0], root, "")
		mkOn(cs[0], root+"/a", "a")
		mkOn(cs[0], root+"/a/b", "b")
		tc, err := recipes.NewTreeCache(ctx, cs[0], root)
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close(ctx)
		if want := c.Name() == "coord"; tc.Persistent() != want {
			t.Errorf("persistent = %v on %s", tc.Persistent(), c.Name())
		}
		if d, _, ok := tc.Get(root + "/a/b"); !ok || string(d) != "b" || tc.Len() != 3 {
			t.Fatalf("initial load: %q %v, %d nodes", d, ok, tc.Len())
		}
		mk(root+"/a/c", "c")
		mk(root+"/a/c/d", "d")
		mk(root+"/x", "x")
		if _, err := cs[1].Set(ctx, root+"/a/b", []byte("b2"), recipes.AnyVersion); err != nil {
			t.Fatal(err)
		}
		until(t, "the new nodes", tc.Changed, func() bool {
			d, _, ok := tc.Get(root + "/a/c/d")
			b, _, _ := tc.Get(root + "/a/b")
			return ok && string(d) == "d" && string(b) == "b2" && tc.Len() == 6 &&
				fmt.Sprint(tc.Children(root+"/a")) == "[b c]"
		})
		for _, p := range []string{root + "/a/c/d", root + "/a/c", root + "/a/b"} {
			if err := cs[1].Delete(ctx, p, recipes.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
		until(t, "the deletions", tc.Changed, func() bool {
			return tc.Len() == 3 && len(tc.Children(root+"/a")) == 0
		})
	})
}

func TestGroup(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const n = 5
		cs := conns(t, c, n+1)
		ctx := ctxT(t)
		dir := testRoot(t) + "/group"
		gw, err := recipes.NewGroup(cs[n], dir).Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close(ctx)
		for i := 0; i < n; i++ {
			if _, err := recipes.NewGroup(cs[i], dir).Join(ctx, fmt.Sprint("m", i), []byte(fmt.Sprint("addr", i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := recipes.NewGroup(cs[1], dir).Join(ctx, "m0", nil); !errors.Is(err, vocab.NodeExists) {
			t.Fatalf("joining under a taken name: %v", err)
		}
		until(t, "every member", gw.Changed, func() bool {
			m := gw.Members()
			return len(m) == n && string(m["m3"]) == "addr3"
		})
		closeConn(t, cs[2]) // a member's session ends: it leaves
		until(t, "the member gone", gw.Changed, func() bool {
			_, ok := gw.Members()["m2"]
			return len(gw.Members()) == n-1 && !ok
		})
		if m, err := recipes.NewGroup(cs[n], dir).Members(ctx); err != nil || len(m) != n-1 {
			t.Fatalf("Members = %v %v", m, err)
		}
	})
}

func TestConfig(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		ctx := ctxT(t)
		root := testRoot(t)
		for _, p := range []string{root, root + "/db", root + "/cache"} {
			if _, err := cs[0].Create(ctx, p, []byte("v0"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := recipes.WatchConfig(ctx, cs[1], root+"/db")
		if err != nil {
			t.Fatal(err)
		}
		defer cfg.Close(ctx)
		if err := recipes.UpdateConfig(ctx, cs[0],
			recipes.ConfigUpdate{Path: root + "/db", Data: []byte("v1"), Version: 0},
			recipes.ConfigUpdate{Path: root + "/cache", Data: []byte("v1"), Version: 0}); err != nil {
			t.Fatal(err)
		}
		until(t, "the update", cfg.Changed, func() bool { d, _, _ := cfg.Current(); return string(d) == "v1" })
		// A stale version fails the whole update.
		err = recipes.UpdateConfig(ctx, cs[0],
			recipes.ConfigUpdate{Path: root + "/db", Data: []byte("v2"), Version: 1},
			recipes.ConfigUpdate{Path: root + "/cache", Data: []byte("v2"), Version: 0})
		if !errors.Is(err, vocab.BadVersion) {
			t.Fatalf("stale update: %v", err)
		}
		if d, _, _ := cs[0].Get(ctx, root+"/db"); string(d) != "v1" {
			t.Fatalf("a failed update changed /db to %q", d)
		}
	})
}

func TestNameServiceAndCounter(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const sessions, each = 5, 8
		cs := conns(t, c, sessions)
		ctx := ctxT(t)
		root := testRoot(t)
		var mu sync.Mutex
		names := map[string]bool{}
		values := map[int64]bool{}
		run(t, sessions, func(i int) error {
			ns := recipes.NewNameService(cs[i], root+"/names")
			k := recipes.NewCounter(cs[i], root+"/counter")
			for j := 0; j < each; j++ {
				name, err := ns.Register(ctx, "job", []byte(fmt.Sprint(i, ":", j)))
				if err != nil {
					return err
				}
				v, err := k.Add(ctx, 1)
				if err != nil {
					return err
				}
				mu.Lock()
				dupName, dupVal := names[name], values[v]
				names[name], values[v] = true, true
				mu.Unlock()
				if dupName || dupVal {
					return fmt.Errorf("duplicate name %s (%v) or counter value %d (%v)", name, dupName, v, dupVal)
				}
				if d, err := ns.Resolve(ctx, name); err != nil || string(d) != fmt.Sprint(i, ":", j) {
					return fmt.Errorf("resolve %s = %q %v", name, d, err)
				}
			}
			return nil
		})
		// Every increment returned a distinct value: together 1..n.
		for v := int64(1); v <= sessions*each; v++ {
			if !values[v] {
				t.Fatalf("no Add returned %d: %v", v, values)
			}
		}
	})
}
