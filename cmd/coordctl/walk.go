package main

import (
	"context"
	"errors"
	"path"
	"slices"
	"sync"

	"coord/client"
	"coord/vocab"
)

// node is one znode as a subtree walk saw it.
type node struct {
	Path     string
	Children []string // names, sorted
	Stat     vocab.Stat
	Data     []byte      // only when the walk read data
	ACL      []vocab.ACL // only when the walk read data
}

// walkWorkers bounds the requests a walk keeps in flight on its session:
// enough to hide the round trip, few enough not to crowd the server.
const walkWorkers = 32

// walk reads the subtree at root level by level, with up to walkWorkers
// requests in flight, and returns its nodes parents first (each level in
// path order). With withData it also reads each node's data and ACL. A
// node deleted during the walk is left out; skip, when set, prunes a path
// and everything under it. onLevel, if set, is told how many nodes each
// level added.
func walk(ctx context.Context, c *client.Conn, root string, withData bool, skip func(string) bool, onLevel func(int)) ([]*node, error) {
	var out []*node
	level := []string{root}
	for len(level) > 0 {
		nodes := make([]*node, len(level))
		errs := make([]error, len(level))
		sem := make(chan struct{}, walkWorkers)
		var wg sync.WaitGroup
		for i, p := range level {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				nodes[i], errs[i] = readNode(ctx, c, p, withData)
			}()
		}
		wg.Wait()
		var next []string
		added := 0
		for i, n := range nodes {
			if errs[i] != nil {
				if errors.Is(errs[i], vocab.NoNode) && level[i] != root {
					continue // deleted while we walked
				}
				return nil, errs[i]
			}
			out = append(out, n)
			added++
			for _, name := range n.Children {
				child := path.Join(n.Path, name)
				if skip == nil || !skip(child) {
					next = append(next, child)
				}
			}
		}
		if onLevel != nil {
			onLevel(added)
		}
		level = next
	}
	return out, nil
}

func readNode(ctx context.Context, c *client.Conn, p string, withData bool) (*node, error) {
	kids, stat, err := c.Children(ctx, p)
	if err != nil {
		return nil, err
	}
	slices.Sort(kids)
	n := &node{Path: p, Children: kids, Stat: stat}
	if withData {
		var kindOwner int64
		if n.Data, n.Stat, kindOwner, err = c.GetKind(ctx, p); err != nil {
			return nil, err
		}
		if kindOwner != 0 {
			// A container or a TTL node: its kind, which Stat hides.
			n.Stat.EphemeralOwner = kindOwner
		}
		if n.ACL, _, err = c.GetACL(ctx, p); err != nil {
			return nil, err
		}
	}
	return n, nil
}
