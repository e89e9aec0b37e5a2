package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"coord/client"
	"coord/vocab"
)

// importNodes creates ops (parents first) with createBatches and returns
// how many it created. A node's own ACL can stop its import: without
// CREATE for this session it takes no children, and without READ
// createBatch cannot check a batch whose answer was lost. Such a node is
// created with a temporary ACL only this session can use (its --user
// identity, else world:anyone: there is no narrower one) and gets its own
// ACL after the last create, deepest nodes first; also when the import
// fails part way, so that no node is left with the temporary ACL.
// (setACL has no multi operation, in coord as in ZooKeeper: those calls
// go one by one, walkWorkers at a time.)
func (g *globals) importNodes(ctx context.Context, c *client.Conn, ops []client.CreateOp, done func(int)) (int, error) {
	ops = append([]client.CreateOp(nil), ops...)
	hasKids := map[string]bool{}
	for _, op := range ops {
		hasKids[path.Dir(op.Path)] = true
	}
	temp := vocab.OpenACLUnsafe
	mine := []vocab.Id{vocab.AnyoneID}
	if g.user != "" {
		user, pass, _ := strings.Cut(g.user, ":")
		temp = vocab.CreatorAllACL // auth: this session's digest identity
		mine = append(mine, vocab.Id{Scheme: "digest", ID: vocab.DigestID(user, pass)})
	}
	final := map[string][]vocab.ACL{}
	for i, op := range ops {
		need := vocab.PermRead
		if hasKids[op.Path] {
			need |= vocab.PermCreate
		}
		if !grants(op.ACL, mine, need) {
			final[op.Path] = op.ACL
			ops[i].ACL = temp
		}
	}
	n, err := createBatches(ctx, c, ops, done)
	if err != nil {
		err = oversize(err, func(p string) int { return createdSize(ops, p) })
	}
	actx := ctx
	if ctx.Err() != nil { // interrupted: still take the temporary ACLs away
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(context.WithoutCancel(ctx), g.dialTimeout)
		defer cancel()
	}
	if aerr := setACLs(actx, c, ops[:n], final); aerr != nil {
		err = errors.Join(err, fmt.Errorf("setting the exported ACLs of nodes created with a temporary one: %w", aerr))
	}
	return n, err
}

// grants reports whether acl surely gives ids every permission of need.
// Only world:anyone and digest entries are judged; the others (ip, x509,
// the superuser) count as not granting.
func grants(acl []vocab.ACL, ids []vocab.Id, need vocab.Perm) bool {
	var have vocab.Perm
	for _, a := range acl {
		for _, id := range ids {
			if a.ID == id {
				have |= a.Perms
			}
		}
	}
	return have&need == need
}

// createdSize is the data length of the create of p in ops; for "" (no
// path known) the largest.
func createdSize(ops []client.CreateOp, p string) int {
	n := 0
	for _, op := range ops {
		if p == "" || p == op.Path {
			n = max(n, len(op.Data))
		}
	}
	return n
}

// setACLs gives the nodes of created that final names their final ACL,
// deepest level first, walkWorkers calls at a time.
func setACLs(ctx context.Context, c *client.Conn, created []client.CreateOp, final map[string][]vocab.ACL) error {
	var paths []string
	for _, op := range created {
		if _, ok := final[op.Path]; ok {
			paths = append(paths, op.Path)
		}
	}
	depth := func(p string) int { return strings.Count(p, "/") }
	slices.SortStableFunc(paths, func(a, b string) int { return depth(b) - depth(a) })
	for len(paths) > 0 {
		level := len(paths)
		for i, p := range paths {
			if depth(p) != depth(paths[0]) {
				level = i
				break
			}
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			firstErr error
		)
		sem := make(chan struct{}, walkWorkers)
		for _, p := range paths[:level] {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, err := c.SetACL(ctx, p, final[p], -1); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		paths = paths[level:]
	}
	return nil
}
