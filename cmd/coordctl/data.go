package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/vocab"
)

func dataCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{lsCommand(g), treeCommand(g), getCommand(g), statCommand(g), createCommand(g),
		setCommand(g), rmCommand(g), syncCommand(g), aclCommand(g), watchCommand(g), multiCommand(g),
		exportCommand(g), importCommand(g), digestCommand(g)}
}

// readData returns the data argument: args[i] itself, standard input for
// "-", nothing when absent.
func (g *globals) readData(args []string, i int) ([]byte, error) {
	if len(args) <= i {
		return nil, nil
	}
	if args[i] == "-" {
		b, err := io.ReadAll(g.stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return b, nil
	}
	return []byte(args[i]), nil
}

// dataJSON puts data in JSON as text when it is UTF-8, else as base64.
func dataJSON(m map[string]any, data []byte) map[string]any {
	if utf8.Valid(data) {
		m["data"] = string(data)
	} else {
		m["data_base64"] = data
	}
	return m
}

func lsCommand(g *globals) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "ls [-R] PATH",
		Short: "List a znode's children (-R: every path under it)",
		Example: `  coordctl ls /
  coordctl ls -R /app
  coordctl ls -o json /app`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				var list []string
				if recursive {
					nodes, err := walk(ctx, c, args[0], false, nil, nil)
					if err != nil {
						return err
					}
					for _, n := range nodes {
						list = append(list, n.Path)
					}
				} else {
					n, err := readNode(ctx, c, args[0], false)
					if err != nil {
						return err
					}
					list = n.Children
				}
				if list == nil {
					list = []string{}
				}
				return g.show(view{json: list, text: func(w io.Writer) {
					for _, s := range list {
						fmt.Fprintln(w, s)
					}
				}})
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list every path in the subtree, parents first")
	return cmd
}

func treeCommand(g *globals) *cobra.Command {
	var sizes, counts bool
	cmd := &cobra.Command{
		Use:   "tree PATH",
		Short: "Draw a subtree, optionally with data sizes and child counts",
		Example: `  coordctl tree /app
  coordctl tree --sizes --counts /`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				nodes, err := walk(ctx, c, args[0], false, nil, nil)
				if err != nil {
					return err
				}
				byPath := map[string]*node{}
				for _, n := range nodes {
					byPath[n.Path] = n
				}
				type jnode struct {
					Path        string `json:"path"`
					DataLength  int32  `json:"dataLength"`
					NumChildren int32  `json:"numChildren"`
				}
				var js []jnode
				for _, n := range nodes {
					js = append(js, jnode{n.Path, n.Stat.DataLength, n.Stat.NumChildren})
				}
				label := func(n *node, name string) string {
					var extra []string
					if sizes {
						extra = append(extra, fmt.Sprintf("%d B", n.Stat.DataLength))
					}
					if counts {
						extra = append(extra, nouns(int(n.Stat.NumChildren), "child", "children"))
					}
					if len(extra) > 0 {
						return name + " [" + strings.Join(extra, ", ") + "]"
					}
					return name
				}
				return g.show(view{json: js, text: func(w io.Writer) {
					root := byPath[args[0]]
					fmt.Fprintln(w, label(root, root.Path))
					var draw func(n *node, prefix string)
					draw = func(n *node, prefix string) {
						for i, name := range n.Children {
							child, ok := byPath[path.Join(n.Path, name)]
							if !ok {
								continue
							}
							branch, indent := "├── ", "│   "
							if i == len(n.Children)-1 {
								branch, indent = "└── ", "    "
							}
							fmt.Fprintln(w, prefix+branch+label(child, name))
							draw(child, prefix+indent)
						}
					}
					draw(root, "")
				}})
			})
		},
	}
	cmd.Flags().BoolVar(&sizes, "sizes", false, "show each node's data size")
	cmd.Flags().BoolVar(&counts, "counts", false, "show each node's number of children")
	return cmd
}

func getCommand(g *globals) *cobra.Command {
	var withStat bool
	cmd := &cobra.Command{
		Use:   "get [--stat] PATH",
		Short: "Print a znode's data (and its Stat)",
		Example: `  coordctl get /app/config
  coordctl get --stat /app/config
  coordctl get -o json /app/config`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				data, stat, err := c.Get(ctx, args[0])
				if err != nil {
					return err
				}
				j := dataJSON(map[string]any{"path": args[0]}, data)
				if withStat {
					j["stat"] = statOut(stat)
				}
				return g.show(view{json: j, text: func(w io.Writer) {
					w.Write(data)
					if len(data) == 0 || data[len(data)-1] != '\n' {
						fmt.Fprintln(w)
					}
					if withStat {
						writeStat(w, stat)
					}
				}})
			})
		},
	}
	cmd.Flags().BoolVarP(&withStat, "stat", "s", false, "also print the Stat")
	return cmd
}

func statCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "stat PATH",
		Short:             "Print a znode's Stat",
		Example:           "  coordctl stat /app\n  coordctl stat -o table /app",
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				ok, stat, err := c.Exists(ctx, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return &vocab.Error{Code: vocab.NoNode, Op: "stat", Path: args[0]}
				}
				return g.show(view{json: statOut(stat), text: func(w io.Writer) { writeStat(w, stat) },
					rows: func() ([]string, [][]string) { return statRows(stat) }})
			})
		},
	}
}

// createMode reads create's flags into a CreateMode.
func createMode(ephemeral, sequential, container bool, ttl time.Duration) (vocab.CreateMode, error) {
	switch {
	case container && (ephemeral || sequential || ttl > 0):
		return 0, usageError{errors.New("-c (container) excludes -e, -s and --ttl")}
	case ephemeral && ttl > 0:
		return 0, usageError{errors.New("-e (ephemeral) excludes --ttl")}
	case container:
		return vocab.ModeContainer, nil
	case ttl > 0 && sequential:
		return vocab.ModePersistentSequentialTTL, nil
	case ttl > 0:
		return vocab.ModePersistentTTL, nil
	case ephemeral && sequential:
		return vocab.ModeEphemeralSequential, nil
	case ephemeral:
		return vocab.ModeEphemeral, nil
	case sequential:
		return vocab.ModePersistentSequential, nil
	}
	return vocab.ModePersistent, nil
}

func createCommand(g *globals) *cobra.Command {
	var ephemeral, sequential, container, parents bool
	var ttl time.Duration
	var aclText string
	cmd := &cobra.Command{
		Use:   "create [-e] [-s] [-c] [--ttl D] [--acl ACL] PATH [DATA|-]",
		Short: "Create a znode (DATA \"-\" reads standard input)",
		Long: `Create a znode. -e makes it ephemeral (it lives only as long as this command's
session, so it is gone when coordctl exits), -s sequential, -c a container,
--ttl a TTL node. --acl takes scheme:id:perms,... (default world:anyone:cdrwa).`,
		Example: `  coordctl create /app
  coordctl create /app/config '{"replicas":3}'
  coordctl create -s /app/queue/item- < item.bin -
  coordctl create --ttl 1h /app/lease
  coordctl create --acl 'world:anyone:r' /app/readonly data`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.RangeArgs(1, 2)(cmd, args); err != nil {
				return err
			}
			return checkPath(args[0], sequential)
		},
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := createMode(ephemeral, sequential, container, ttl)
			if err != nil {
				return err
			}
			acl := vocab.OpenACLUnsafe
			if aclText != "" {
				if acl, err = parseACL(aclText); err != nil {
					return err
				}
			}
			data, err := g.readData(args, 1)
			if err != nil {
				return err
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				if parents {
					if err := makeParents(ctx, c, args[0]); err != nil {
						return err
					}
				}
				created, stat, err := c.CreateTTL(ctx, args[0], data, mode, acl, ttl)
				if err != nil {
					return oversize(err, func(string) int { return len(data) })
				}
				return g.show(view{json: map[string]any{"path": created, "stat": statOut(stat)},
					text: func(w io.Writer) { fmt.Fprintf(w, "Created %s\n", created) }})
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&ephemeral, "ephemeral", "e", false, "ephemeral: deleted when this command's session ends")
	f.BoolVarP(&sequential, "sequential", "s", false, "sequential: the server appends a 10-digit counter")
	f.BoolVarP(&container, "container", "c", false, "container: deleted by the server once its last child goes")
	f.DurationVar(&ttl, "ttl", 0, "TTL node: deleted by the server after D without changes and children")
	f.StringVar(&aclText, "acl", "", "ACL as scheme:id:perms,... (default world:anyone:cdrwa)")
	f.BoolVarP(&parents, "parents", "p", false, "create missing parents (persistent, empty)")
	return cmd
}

// makeParents creates the missing ancestors of p.
func makeParents(ctx context.Context, c *client.Conn, p string) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := 1; i < len(parts); i++ {
		anc := "/" + strings.Join(parts[:i], "/")
		if _, err := c.Create(ctx, anc, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil && !errors.Is(err, vocab.NodeExists) {
			return err
		}
	}
	return nil
}

func setCommand(g *globals) *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set [-v VERSION] PATH DATA|-",
		Short: "Replace a znode's data, if its version matches -v",
		Example: `  coordctl set /app/config '{"replicas":5}'
  coordctl set -v 3 /app/config new-value
  coordctl set /app/blob - < blob.bin`,
		Args:              pathArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := g.readData(args, 1)
			if err != nil {
				return err
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				stat, err := c.Set(ctx, args[0], data, version)
				if err != nil {
					return oversize(err, func(string) int { return len(data) })
				}
				return g.show(view{json: map[string]any{"path": args[0], "stat": statOut(stat)},
					text: func(w io.Writer) { fmt.Fprintf(w, "Set %s (version %d)\n", args[0], stat.Version) }})
			})
		},
	}
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "expected data version; -1 for any")
	return cmd
}

func rmCommand(g *globals) *cobra.Command {
	var recursive bool
	var version int32
	cmd := &cobra.Command{
		Use:   "rm [-r] [-v VERSION] PATH",
		Short: "Delete a znode (-r: and everything under it)",
		Example: `  coordctl rm /app/config
  coordctl rm -v 4 /app/config
  coordctl rm -r /app`,
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			if recursive && version != -1 {
				return usageError{errors.New("-v applies to a single delete, not -r")}
			}
			if args[0] == "/" {
				return usageError{errors.New("the root cannot be deleted")}
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				n := 1
				if recursive {
					var err error
					if n, err = deleteTree(ctx, c, args[0]); err != nil {
						return err
					}
				} else if err := c.Delete(ctx, args[0], version); err != nil {
					return err
				}
				return g.show(view{json: map[string]any{"path": args[0], "deleted": n},
					text: func(w io.Writer) { fmt.Fprintf(w, "Deleted %s (%s)\n", args[0], nouns(n, "node", "nodes")) }})
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "delete the whole subtree, deepest first")
	cmd.Flags().Int32VarP(&version, "version", "v", -1, "expected data version; -1 for any")
	return cmd
}

// deleteTree deletes the subtree at root, deepest nodes first, with up to
// walkWorkers deletes in flight, and returns how many nodes it deleted.
// Nodes someone else deletes meanwhile are fine.
func deleteTree(ctx context.Context, c *client.Conn, root string) (int, error) {
	nodes, err := walk(ctx, c, root, false, nil, nil)
	if err != nil {
		return 0, err
	}
	depth := func(p string) int { return strings.Count(p, "/") }
	var deleted int
	var mu sync.Mutex
	var firstErr error
	for i := len(nodes); i > 0; {
		d := depth(nodes[i-1].Path)
		j := i
		for j > 0 && depth(nodes[j-1].Path) == d {
			j--
		}
		sem := make(chan struct{}, walkWorkers)
		var wg sync.WaitGroup
		for _, n := range nodes[j:i] {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := c.Delete(ctx, n.Path, -1)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					deleted++
				case errors.Is(err, vocab.NoNode):
				case firstErr == nil:
					firstErr = err
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return deleted, firstErr
		}
		i = j
	}
	return deleted, nil
}

func syncCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "sync PATH",
		Short:             "Wait until the server this session is on has applied what the leader committed",
		Example:           "  coordctl sync /",
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				p, err := c.Sync(ctx, args[0])
				if err != nil {
					return err
				}
				return g.show(view{json: map[string]any{"path": p, "server": c.Server(), "lastZxid": c.LastZxid()},
					text: func(w io.Writer) { fmt.Fprintf(w, "Synced %s on %s\n", p, c.Server()) }})
			})
		},
	}
}
