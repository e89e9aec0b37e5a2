package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/vocab"
)

// multiOp is one operation of a multi file.
type multiOp struct {
	Op         string `json:"op"` // create, set, delete, check
	Path       string `json:"path"`
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
	Version    *int32 `json:"version,omitempty"` // default -1 (any)
	Mode       string `json:"mode,omitempty"`    // create: persistent (default), ephemeral, sequential, ...
	TTL        string `json:"ttl,omitempty"`     // create with a TTL mode
	ACL        string `json:"acl,omitempty"`     // create: scheme:id:perms,...
}

// modeNames are the create modes by name, in multi and export files.
var modeNames = map[string]vocab.CreateMode{
	"persistent":                vocab.ModePersistent,
	"ephemeral":                 vocab.ModeEphemeral,
	"persistent_sequential":     vocab.ModePersistentSequential,
	"ephemeral_sequential":      vocab.ModeEphemeralSequential,
	"container":                 vocab.ModeContainer,
	"persistent_ttl":            vocab.ModePersistentTTL,
	"persistent_sequential_ttl": vocab.ModePersistentSequentialTTL,
}

func (m multiOp) toOp(i int) (client.Op, error) {
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("operation %d (%s %s): %s", i+1, m.Op, m.Path, fmt.Sprintf(format, a...))}
	}
	if m.Path == "" {
		return nil, bad("no path")
	}
	if err := checkPath(m.Path, m.Op == "create" && modeNames[m.Mode].IsSequential()); err != nil {
		return nil, bad("%v", err)
	}
	version := int32(-1)
	if m.Version != nil {
		version = *m.Version
	}
	data := []byte(m.Data)
	if m.DataBase64 != nil {
		data = m.DataBase64
	}
	switch m.Op {
	case "create":
		mode := vocab.ModePersistent
		if m.Mode != "" {
			var ok bool
			if mode, ok = modeNames[m.Mode]; !ok {
				return nil, bad("unknown mode %q", m.Mode)
			}
		}
		var ttl time.Duration
		if m.TTL != "" {
			var err error
			if ttl, err = time.ParseDuration(m.TTL); err != nil {
				return nil, bad("ttl: %v", err)
			}
		}
		acl := vocab.OpenACLUnsafe
		if m.ACL != "" {
			var err error
			if acl, err = parseACL(m.ACL); err != nil {
				return nil, bad("%v", err)
			}
		}
		return client.CreateOp{Path: m.Path, Data: data, Mode: mode, ACL: acl, TTL: ttl}, nil
	case "set":
		return client.SetDataOp{Path: m.Path, Data: data, Version: version}, nil
	case "delete":
		return client.DeleteOp{Path: m.Path, Version: version}, nil
	case "check":
		if m.Version == nil {
			return nil, bad("check needs a version")
		}
		return client.CheckOp{Path: m.Path, Version: version}, nil
	}
	return nil, bad("unknown op: want create, set, delete or check")
}

func multiCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "multi FILE|-",
		Short: "Apply a JSON file of operations atomically: all of them or none",
		Long: `Apply the operations in FILE ("-": standard input) as one ZooKeeper multi: all
take effect or none does. FILE is a JSON array of objects:

  {"op": "create", "path": P, "data": TEXT, "mode": MODE, "ttl": D, "acl": ACL}
  {"op": "set",    "path": P, "data": TEXT, "version": V}
  {"op": "delete", "path": P, "version": V}
  {"op": "check",  "path": P, "version": V}

"data_base64" may replace "data"; version defaults to -1 (any) except for
check; MODE is persistent (default), ephemeral, persistent_sequential,
ephemeral_sequential, container, persistent_ttl or persistent_sequential_ttl.`,
		Example: `  coordctl multi ops.json
  echo '[{"op":"check","path":"/app","version":0},{"op":"create","path":"/app/x","data":"1"}]' | coordctl multi -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = g.stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError{err}
				}
				defer f.Close()
				r = f
			}
			var file []multiOp
			if err := json.NewDecoder(r).Decode(&file); err != nil {
				return usageError{fmt.Errorf("multi file: %v", err)}
			}
			if len(file) == 0 {
				return usageError{errors.New("multi file holds no operations")}
			}
			ops := make([]client.Op, len(file))
			for i, m := range file {
				op, err := m.toOp(i)
				if err != nil {
					return err
				}
				ops[i] = op
			}
			return g.onSession(cmd, func(ctx context.Context, c *client.Conn) error {
				res, err := c.Multi(ctx, ops...)
				type jres struct {
					Op      string    `json:"op"`
					Path    string    `json:"path"`
					Error   string    `json:"error,omitempty"`
					Created string    `json:"created,omitempty"`
					Stat    *statJSON `json:"stat,omitempty"`
				}
				var out []jres
				for i, r := range res {
					j := jres{Op: file[i].Op, Path: file[i].Path}
					if r.Err != nil {
						j.Error = vocab.CodeOf(r.Err).String()
					}
					if file[i].Op == "create" && r.Err == nil {
						j.Created = r.Path
					}
					if (file[i].Op == "create" || file[i].Op == "set") && r.Err == nil {
						s := statOut(r.Stat)
						j.Stat = &s
					}
					out = append(out, j)
				}
				if err != nil {
					if g.output == "json" {
						g.show(view{json: map[string]any{"ok": false, "results": out}})
					}
					return oversize(err, func(p string) int { return dataSize(ops, p) })
				}
				return g.show(view{json: map[string]any{"ok": true, "results": out}, text: func(w io.Writer) {
					for _, j := range out {
						switch j.Op {
						case "create":
							fmt.Fprintf(w, "create %s: created %s\n", j.Path, j.Created)
						case "set":
							fmt.Fprintf(w, "set %s: version %d\n", j.Path, j.Stat.Version)
						default:
							fmt.Fprintf(w, "%s %s: ok\n", j.Op, j.Path)
						}
					}
				}})
			})
		},
	}
}

// dataSize is the length of the data that ops create or set at p; for ""
// (no path known) the largest.
func dataSize(ops []client.Op, p string) int {
	n := 0
	for _, op := range ops {
		var path string
		var data []byte
		switch o := op.(type) {
		case client.CreateOp:
			path, data = o.Path, o.Data
		case client.SetDataOp:
			path, data = o.Path, o.Data
		}
		if p == "" || p == path {
			n = max(n, len(data))
		}
	}
	return n
}
