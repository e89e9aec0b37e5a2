package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/vocab"
)

// skipSystem leaves ZooKeeper's /zookeeper subtree out of exports of /.
func skipSystem(p string) bool { return p == "/zookeeper" }

// readSubtree reads the subtree at root into an export, leaving out
// ephemerals (and what is under them: nothing, ephemerals have no
// children) and /zookeeper.
func (g *globals) readSubtree(ctx context.Context, c *client.Conn, root string) (*vocab.ExportFile, int, error) {
	total, err := c.GetAllChildrenNumber(ctx, root)
	if err != nil {
		return nil, 0, err
	}
	p := g.progress("reading "+root, "nodes", int64(total)+1)
	nodes, err := walk(ctx, c, root, true, skipSystem, p.add)
	p.done()
	if err != nil {
		return nil, 0, err
	}
	f := &vocab.ExportFile{Format: vocab.ExportFormat, Root: root}
	skipped := 0
	for _, n := range nodes {
		mode, ttl, ok := vocab.NodeKind(n.Stat.EphemeralOwner)
		if !ok {
			skipped++
			continue
		}
		f.Nodes = append(f.Nodes, vocab.ExportNode{Path: vocab.RelPath(root, n.Path), Data: n.Data, ACL: vocab.ACLsText(n.ACL), Mode: mode, TTLms: ttl})
	}
	f.Digest = vocab.ExportDigest(f.Nodes)
	return f, skipped, nil
}

func exportCommand(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export PATH [> FILE]",
		Short: "Write a subtree as JSON: data, ACLs and node types",
		Long: `Write the subtree at PATH as JSON to standard output (or --file): every node's
path relative to PATH, data (base64), ACL and type. Ephemeral nodes belong
to live sessions and are left out, as is /zookeeper. Containers and TTL nodes
are written as persistent: the server's Stat does not tell them apart (as in
ZooKeeper). The file carries the subtree's digest.`,
		Example: `  coordctl export /app > app.json
  coordctl export --file all.json /`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				f, skipped, err := g.readSubtree(ctx, c, args[0])
				if err != nil {
					return err
				}
				var w io.Writer = g.stdout
				if file != "" {
					out, err := os.Create(file)
					if err != nil {
						return usageError{err}
					}
					defer out.Close()
					w = out
				}
				bw := bufio.NewWriter(w)
				if err := json.NewEncoder(bw).Encode(f); err != nil {
					return err
				}
				if err := bw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "exported %s of %s (%d ephemeral left out), %s\n", nouns(len(f.Nodes), "node", "nodes"), args[0], skipped, f.Digest)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file instead of standard output")
	return cmd
}

// importBatch bounds one multi of an import: in operations and in bytes of
// data, well under the server's request limit.
const (
	importBatchOps   = 500
	importBatchBytes = 512 << 10
)

func importCommand(g *globals) *cobra.Command {
	var to, fromZK string
	cmd := &cobra.Command{
		Use:   "import FILE|- [--to PATH] | import --from-zookeeper HOST:PORT[,...] [PATH]",
		Short: "Create a subtree from an export file, or copy a live ZooKeeper tree",
		Long: `Create the nodes of an export file under its root, or under --to PATH. The
root must not exist yet (unless it is /, which is left as it is); nodes are
created parents first in atomic batches of up to 500, so a failure leaves
whole batches behind, never half a node's parents. A node whose own ACL would
stop the import (no CREATE for its children, no READ for this session) is
created with a temporary ACL (--user's identity, else world:anyone) and gets
its own ACL at the end, deepest nodes first.

With --from-zookeeper, copy the tree at PATH (default /) of a live Apache
ZooKeeper ensemble into coord, at the same path: data, ACLs and persistent
nodes (sequential nodes keep their names; ZooKeeper shows containers and TTL
nodes to clients as persistent ones, so they are copied as such; /zookeeper
is left out). Ephemerals belong to ZooKeeper's sessions and are left out and
counted. Nodes already in coord are kept, so running it again after an
interruption resumes. It ends by comparing the node counts and digests of
both trees (exit 10 if they differ: stop writes to ZooKeeper while copying).`,
		Example: `  coordctl import app.json
  coordctl import --to /app-copy app.json
  coordctl export /app | coordctl --servers other:2182 import -
  coordctl import --from-zookeeper zk1:2181,zk2:2181 /app`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fromZK != "" {
				root := "/"
				if len(args) == 1 {
					root = args[0]
				}
				if to != "" {
					return usageError{errors.New("--to goes with a file; --from-zookeeper copies to the same path")}
				}
				if err := checkPath(root, false); err != nil {
					return err
				}
				ctx, cancel := g.ctx(cmd)
				defer cancel()
				return g.importFromZooKeeper(ctx, zkServers(fromZK), root)
			}
			if len(args) != 1 {
				return usageError{errors.New("import needs a FILE (or - for standard input), or --from-zookeeper")}
			}
			if to != "" && to != "/" {
				if err := checkPath(strings.TrimSuffix(to, "/"), false); err != nil {
					return err
				}
			}
			var r io.Reader = g.stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError{err}
				}
				defer f.Close()
				r = bufio.NewReader(f)
			}
			var f vocab.ExportFile
			if err := json.NewDecoder(r).Decode(&f); err != nil {
				return usageError{fmt.Errorf("export file: %v", err)}
			}
			if f.Format != vocab.ExportFormat {
				return usageError{fmt.Errorf("export file format %q: want %q", f.Format, vocab.ExportFormat)}
			}
			digest := vocab.ExportDigest(f.Nodes)
			if f.Digest != "" && f.Digest != digest {
				return usageError{fmt.Errorf("export file: its nodes hash to %s, not to the %s it records", digest, f.Digest)}
			}
			root := f.Root
			if to != "" {
				root = strings.TrimSuffix(to, "/")
				if root == "" {
					root = "/"
				}
			}
			ops := make([]client.CreateOp, 0, len(f.Nodes))
			for i, n := range f.Nodes {
				p := vocab.JoinRel(root, n.Path)
				if p == "/" {
					continue
				}
				mode, ok := modeNames[n.Mode]
				if !ok || mode.IsEphemeral() || mode.IsSequential() {
					return usageError{fmt.Errorf("node %d (%s): mode %q: want persistent, container or persistent_ttl", i, n.Path, n.Mode)}
				}
				acl, err := vocab.ACLsFromText(n.ACL)
				if err != nil {
					return usageError{fmt.Errorf("node %d (%s): %v", i, n.Path, err)}
				}
				ops = append(ops, client.CreateOp{Path: p, Data: n.Data, Mode: mode, ACL: acl, TTL: time.Duration(n.TTLms) * time.Millisecond})
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				p := g.progress("importing to "+root, "nodes", int64(len(ops)))
				defer p.done()
				if n, err := g.importNodes(ctx, c, ops, p.add); err != nil {
					return fmt.Errorf("after %d of %d nodes: %w", n, len(ops), err)
				}
				p.done()
				return g.show(view{json: map[string]any{"root": root, "created": len(ops), "digest": digest},
					text: func(w io.Writer) {
						fmt.Fprintf(w, "Imported %s to %s (%s)\n", nouns(len(ops), "node", "nodes"), root, digest)
					}})
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "create the subtree here instead of at the file's root")
	cmd.Flags().StringVar(&fromZK, "from-zookeeper", "", "copy from this live ZooKeeper ensemble (host:port,...)")
	return cmd
}

func digestCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "digest PATH",
		Short: "Hash a subtree's paths, data, ACLs and node types",
		Long: `Print the digest that export would write for the subtree at PATH: two subtrees
with the same digest hold the same nodes (relative paths, data, ACLs, types),
whatever their roots, zxids and times.`,
		Example:           "  coordctl digest /app\n  coordctl digest -o json /app",
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				f, skipped, err := g.readSubtree(ctx, c, args[0])
				if err != nil {
					return err
				}
				return g.show(view{json: map[string]any{"path": args[0], "digest": f.Digest, "nodes": len(f.Nodes), "ephemeral": skipped},
					text: func(w io.Writer) {
						fmt.Fprintf(w, "%s %s %s\n", f.Digest, nouns(len(f.Nodes), "node", "nodes"), args[0])
					}})
			})
		},
	}
}

// createBatches creates ops in multis of at most importBatchOps creates and
// importBatchBytes bytes, calling done after each, and returns how many it
// created. A batch whose answer is lost with the connection (the client
// re-attaches the session to another server) applied whole or not at all:
// its last node, there with the batch's data and created after the batch
// was sent, says it applied; otherwise the batch is sent again.
func createBatches(ctx context.Context, c *client.Conn, ops []client.CreateOp, done func(n int)) (int, error) {
	for start := 0; start < len(ops); {
		end, size := start, 0
		for end < len(ops) && end-start < importBatchOps && (end == start || size+len(ops[end].Data)+len(ops[end].Path) <= importBatchBytes) {
			size += len(ops[end].Data) + len(ops[end].Path)
			end++
		}
		if err := createBatch(ctx, c, ops[start:end]); err != nil {
			return start, err
		}
		done(end - start)
		start = end
	}
	return len(ops), nil
}

// createBatch runs one batch of createBatches.
func createBatch(ctx context.Context, c *client.Conn, batch []client.CreateOp) error {
	multi := make([]client.Op, len(batch))
	for i := range batch {
		multi[i] = batch[i]
	}
	last := batch[len(batch)-1]
	for tries := 1; ; tries++ {
		sent := c.LastZxid()
		_, err := c.Multi(ctx, multi...)
		if err == nil || !errors.Is(err, vocab.ConnectionLoss) || tries == 5 {
			return err
		}
		var data []byte
		var st vocab.Stat
		for {
			data, st, err = c.Get(ctx, last.Path)
			if !errors.Is(err, vocab.ConnectionLoss) {
				break
			}
			select { // the session is moving to another server
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		switch {
		case errors.Is(err, vocab.NoNode): // not applied: send it again
		case err != nil:
			return err
		case st.Czxid > sent && bytes.Equal(data, last.Data):
			return nil
		default:
			return &vocab.Error{Code: vocab.NodeExists, Op: "create", Path: last.Path}
		}
	}
}
