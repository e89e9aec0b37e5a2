package main

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/fsm"
)

// checkPath refuses a znode path the servers would refuse, with zkCli.sh's
// words (PathUtils.validatePath) and before any server is contacted: a
// relative path or a stray slash would otherwise read as "node does not
// exist" or "bad arguments". sequential allows the trailing slash of a
// sequential create's prefix ("/queue/" names "/queue/0000000001").
func checkPath(p string, sequential bool) error {
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("path %q: %s", p, fmt.Sprintf(format, a...))}
	}
	check := p
	if sequential {
		check += "1" // ZooKeeper checks a sequential prefix with a digit appended
	}
	switch {
	case p == "":
		return bad("must not be empty")
	case p[0] != '/':
		return bad("must start with / character")
	case len(check) > 1 && strings.HasSuffix(check, "/"):
		return bad("must not end with / character")
	}
	if check != "/" {
		for _, name := range strings.Split(check[1:], "/") {
			switch name {
			case "":
				return bad("empty node name specified")
			case ".", "..":
				return bad("relative paths not allowed")
			}
		}
	}
	if fsm.ValidateCreatePath(p, sequential) != nil {
		return bad("invalid character (control characters, U+007F-U+009F, U+D800-U+F8FF and U+FFF0 up are not allowed)")
	}
	return nil
}

// pathArgs checks the arguments with n, then the first as a znode path.
func pathArgs(n cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := n(cmd, args); err != nil {
			return err
		}
		return checkPath(args[0], false)
	}
}

// completionTimeout bounds the session that shell completion opens: a
// prompt must not hang on an unreachable cluster.
const completionTimeout = 2 * time.Second

// completePath is the ValidArgsFunction of the commands whose first
// argument is a znode path: it lists, through a short-lived session, the
// children of the typed prefix's parent whose names start as typed
// ("/ap" gives "/app", "/app/" every child of /app). On any error it offers
// nothing (and no file names).
func (g *globals) completePath(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if toComplete == "" {
		toComplete = "/"
	}
	if toComplete[0] != '/' {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dir, prefix := path.Split(toComplete)
	if dir != "/" {
		dir = strings.TrimSuffix(dir, "/")
	}
	if checkPath(dir, false) != nil || g.resolve(cmd.Flags()) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	g.dialTimeout = min(g.dialTimeout, completionTimeout)
	var out []cobra.Completion
	err := g.withSession(ctx, func(c *client.Conn) error {
		kids, _, err := c.Children(ctx, dir)
		slices.Sort(kids)
		for _, k := range kids {
			if strings.HasPrefix(k, prefix) {
				out = append(out, path.Join(dir, k))
			}
		}
		return err
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	// No space after a completed name: the path may go on ("/app" + "/").
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
