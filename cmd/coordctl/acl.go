package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/vocab"
)

// ACLs are written as zkCli.sh writes them: scheme:id:perms, comma
// separated, with perms a subset of "cdrwa" (create, delete, read, write,
// admin). The id may itself hold colons (digest:user:hash, ip:::1).

// parseACL reads "scheme:id:perms[,scheme:id:perms...]".
func parseACL(s string) ([]vocab.ACL, error) {
	var out []vocab.ACL
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		scheme, rest, ok := strings.Cut(part, ":")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 || scheme == "" {
			return nil, usageError{fmt.Errorf("ACL %q: want scheme:id:perms", part)}
		}
		perms, err := vocab.ParsePerms(rest[i+1:])
		if err != nil {
			return nil, usageError{fmt.Errorf("ACL %q: %v", part, err)}
		}
		out = append(out, vocab.ACL{Perms: perms, ID: vocab.Id{Scheme: scheme, ID: rest[:i]}})
	}
	if len(out) == 0 {
		return nil, usageError{errors.New("empty ACL")}
	}
	return out, nil
}

func aclString(a vocab.ACL) string {
	return a.ID.Scheme + ":" + a.ID.ID + ":" + vocab.PermString(a.Perms)
}

// vocab.ACLText is one ACL entry in JSON output and in export files.
func aclCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Read or replace a znode's ACL",
		Example: `  coordctl acl get /app
  coordctl acl set /app 'digest:admin:x1nq8J5GOJVPY6zgBTvBoJ8Jstc=:cdrwa,world:anyone:r'`,
	}
	get := &cobra.Command{
		Use:               "get PATH",
		Short:             "Print a znode's ACL, one scheme:id:perms a line",
		Example:           "  coordctl acl get /app\n  coordctl acl get -o json /app",
		Args:              pathArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				acl, stat, err := c.GetACL(ctx, args[0])
				if err != nil {
					return err
				}
				return g.show(view{
					json: map[string]any{"path": args[0], "acl": vocab.ACLsText(acl), "aversion": stat.Aversion},
					text: func(w io.Writer) {
						for _, a := range acl {
							fmt.Fprintln(w, aclString(a))
						}
					},
					rows: func() ([]string, [][]string) {
						var rows [][]string
						for _, a := range acl {
							rows = append(rows, []string{a.ID.Scheme, a.ID.ID, vocab.PermString(a.Perms)})
						}
						return []string{"SCHEME", "ID", "PERMS"}, rows
					},
				})
			})
		},
	}
	var version int32
	set := &cobra.Command{
		Use:               "set PATH ACL",
		Short:             "Replace a znode's ACL (scheme:id:perms,...), if its ACL version matches -v",
		Example:           "  coordctl acl set /app world:anyone:r\n  coordctl acl set -v 2 /app 'ip:127.0.0.1:cdrwa'",
		Args:              pathArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: g.completePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			acl, err := parseACL(args[1])
			if err != nil {
				return err
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				stat, err := c.SetACL(ctx, args[0], acl, version)
				if err != nil {
					return err
				}
				return g.show(view{
					json: map[string]any{"path": args[0], "stat": statOut(stat)},
					text: func(w io.Writer) { fmt.Fprintf(w, "Set ACL of %s (aclVersion %d)\n", args[0], stat.Aversion) },
				})
			})
		},
	}
	set.Flags().Int32VarP(&version, "version", "v", -1, "expected ACL version (aversion); -1 for any")
	cmd.AddCommand(get, set)
	return cmd
}
