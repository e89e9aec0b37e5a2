package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/client"
	"coord/vocab"
)

// zkImport is what import --from-zookeeper did.
type zkImport struct {
	Root       string `json:"root"`
	Nodes      int    `json:"nodes"`        // the ZooKeeper tree's nodes, ephemerals left out
	Created    int    `json:"created"`      // created in coord by this run
	Present    int    `json:"present"`      // already in coord (an earlier, interrupted run)
	Ephemerals int    `json:"ephemerals"`   // left out: they belong to ZooKeeper's sessions
	ZKDigest   string `json:"zk_digest"`    // of the ZooKeeper tree, as export computes it
	Digest     string `json:"coord_digest"` // of the coord tree after the copy
	Same       bool   `json:"same"`
}

// importFromZooKeeper copies the live ZooKeeper tree at root into coord:
// data, ACLs and persistent nodes (sequential nodes keep their names;
// containers and TTL nodes look persistent to a ZooKeeper client and are
// copied as such), ephemerals left out and counted. Nodes already in coord
// (an earlier run that was interrupted) are kept, so running it again
// resumes. It ends by comparing both trees' counts and digests.
func (g *globals) importFromZooKeeper(ctx context.Context, servers []string, root string) error {
	zc, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false))
	if err != nil {
		return unreachableError{servers: servers, err: err}
	}
	defer zc.Close()
	if err := waitZKSession(ctx, events, g.commandTimeout); err != nil {
		return unreachableError{servers: servers, err: err}
	}
	p := g.progress("reading ZooKeeper "+root, "nodes", 0)
	nodes, ephemerals, err := walkZooKeeper(ctx, zc, root, p.add)
	p.done()
	if err != nil {
		return fmt.Errorf("reading ZooKeeper: %w", err)
	}
	res := zkImport{Root: root, Nodes: len(nodes), Ephemerals: ephemerals, ZKDigest: vocab.ExportDigest(nodes)}
	return g.withSession(ctx, func(c *client.Conn) error {
		present := map[string]bool{}
		if have, err := walk(ctx, c, root, false, skipSystem, nil); err == nil {
			for _, n := range have {
				present[vocab.RelPath(root, n.Path)] = true
			}
		} else if !errors.Is(err, vocab.NoNode) {
			return err
		}
		var ops []client.CreateOp
		for _, n := range nodes {
			if present[n.Path] {
				res.Present++
				continue
			}
			p := vocab.JoinRel(root, n.Path)
			if p == "/" {
				continue
			}
			acl, err := vocab.ACLsFromText(n.ACL)
			if err != nil {
				return fmt.Errorf("%s: %v", p, err)
			}
			ops = append(ops, client.CreateOp{Path: p, Data: n.Data, Mode: vocab.ModePersistent, ACL: acl})
		}
		bar := g.progress("copying to coord", "nodes", int64(len(ops)))
		n, err := g.importNodes(ctx, c, ops, bar.add)
		res.Created += n
		if err != nil {
			bar.done()
			return fmt.Errorf("after %d of %d nodes (run again to resume): %w", n, len(ops), err)
		}
		bar.done()
		f, _, err := g.readSubtree(ctx, c, root)
		if err != nil {
			return err
		}
		res.Digest, res.Same = f.Digest, f.Digest == res.ZKDigest && len(f.Nodes) == res.Nodes
		g.show(view{json: res, text: func(w io.Writer) {
			fmt.Fprintf(w, "Copied %s from ZooKeeper: %s (%d created now, %d already there), %s left out\n",
				root, nouns(res.Nodes, "node", "nodes"), res.Created, res.Present, nouns(res.Ephemerals, "ephemeral", "ephemerals"))
			verdict := "the same"
			if !res.Same {
				verdict = fmt.Sprintf("DIFFERENT (coord has %s)", nouns(len(f.Nodes), "node", "nodes"))
			}
			fmt.Fprintf(w, "ZooKeeper %s\ncoord     %s\ntrees are %s\n", res.ZKDigest, res.Digest, verdict)
		}})
		if !res.Same {
			return checkFailed{"the copy differs from the ZooKeeper tree (was ZooKeeper written to during the copy?)"}
		}
		return nil
	})
}

func waitZKSession(ctx context.Context, events <-chan zk.Event, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return nil
			}
		case <-t.C:
			return fmt.Errorf("no ZooKeeper session within %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// walkZooKeeper reads ZooKeeper's subtree at root level by level, with up
// to walkWorkers requests in flight, as export nodes (paths relative to
// root, parents first), leaving out /zookeeper and ephemerals.
func walkZooKeeper(ctx context.Context, zc *zk.Conn, root string, onLevel func(int)) ([]vocab.ExportNode, int, error) {
	var out []vocab.ExportNode
	ephemerals := 0
	level := []string{root}
	for len(level) > 0 && ctx.Err() == nil {
		type read struct {
			data []byte
			stat *zk.Stat
			acl  []zk.ACL
			kids []string
			err  error
		}
		reads := make([]read, len(level))
		sem := make(chan struct{}, walkWorkers)
		var wg sync.WaitGroup
		for i, p := range level {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				r := &reads[i]
				if r.data, r.stat, r.err = zc.Get(p); r.err != nil {
					return
				}
				if r.acl, _, r.err = zc.GetACL(p); r.err != nil {
					return
				}
				r.kids, _, r.err = zc.Children(p)
			}()
		}
		wg.Wait()
		var next []string
		added := 0
		for i, r := range reads {
			if errors.Is(r.err, zk.ErrNoNode) && level[i] != root {
				continue // deleted while we read
			}
			if r.err != nil {
				return nil, 0, fmt.Errorf("%s: %w", level[i], r.err)
			}
			if r.stat.EphemeralOwner != 0 {
				ephemerals++
				continue
			}
			acl := make([]vocab.ACL, len(r.acl))
			for j, a := range r.acl {
				acl[j] = vocab.ACL{Perms: vocab.Perm(a.Perms), ID: vocab.Id{Scheme: a.Scheme, ID: a.ID}}
			}
			out = append(out, vocab.ExportNode{Path: vocab.RelPath(root, level[i]), Data: r.data, ACL: vocab.ACLsText(acl), Mode: "persistent"})
			added++
			slices.Sort(r.kids)
			for _, k := range r.kids {
				child := path.Join(level[i], k)
				if !skipSystem(child) {
					next = append(next, child)
				}
			}
		}
		if onLevel != nil {
			onLevel(added)
		}
		level = next
	}
	return out, ephemerals, ctx.Err()
}

// zkServers splits a --from-zookeeper list.
func zkServers(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
