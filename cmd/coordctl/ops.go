package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"coord/api"
	"coord/server/replica"
)

// sessionsCommand lists the cluster's sessions and kills one.
func sessionsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the cluster's sessions (kill: close one)",
		Long: `List every session in the cluster's session table: id, timeout, the
connection that holds it (server id#boot/n) and how many ephemerals it owns.`,
		Example: "  coordctl sessions\n  coordctl sessions -o json\n  coordctl sessions kill 0x100000001",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			a, _, err := g.anyAdmin(ctx)
			if err != nil {
				return err
			}
			defer a.Close()
			resp, err := a.Sessions(ctx, &api.SessionsRequest{})
			if err != nil {
				return adminErr("sessions", a.addr, err)
			}
			type sj struct {
				ID         string `json:"id"`
				TimeoutMs  int32  `json:"timeout_ms"`
				Owner      string `json:"owner"`
				Server     string `json:"server"`
				Ephemerals int64  `json:"ephemerals"`
			}
			js := []sj{}
			for _, s := range resp.Sessions {
				server, _, _ := strings.Cut(s.Owner, "#")
				js = append(js, sj{fmt.Sprintf("0x%x", s.Id), s.TimeoutMs, s.Owner, server, s.Ephemerals})
			}
			rows := func() ([]string, [][]string) {
				var rows [][]string
				for _, j := range js {
					rows = append(rows, []string{j.ID, fmt.Sprintf("%dms", j.TimeoutMs), j.Server, fmt.Sprint(j.Ephemerals), j.Owner})
				}
				return []string{"SESSION", "TIMEOUT", "SERVER", "EPHEMERALS", "OWNER"}, rows
			}
			return g.show(view{json: js, rows: rows, text: func(w io.Writer) {
				head, r := rows()
				writeTable(w, head, r)
			}})
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "kill ID",
		Short:   "Close a session as its expiry would (its ephemerals go, its client is told)",
		Example: "  coordctl sessions kill 0x100000001",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "0x"), 16, 64)
			if err != nil {
				return usageError{fmt.Errorf("session id %q: want hex, as coordctl sessions prints it", args[0])}
			}
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			a, _, err := g.anyAdmin(ctx)
			if err != nil {
				return err
			}
			defer a.Close()
			if _, err := a.KillSession(ctx, &api.KillSessionRequest{Id: id}); err != nil {
				return adminErr("sessions kill", a.addr, err)
			}
			return g.show(view{json: map[string]string{"killed": fmt.Sprintf("0x%x", id)}, text: func(w io.Writer) {
				fmt.Fprintf(w, "session 0x%x closed\n", id)
			}})
		},
	})
	return cmd
}

// hashKVCommand compares the members' state digests at one index.
func hashKVCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "hashkv",
		Short: "Compare every member's state digest at the same applied index",
		Long: `Ask every member for the SHA-256 digest of its state once it has applied what the
leader has applied, and compare the digests of the members that answered at
the same index (writes in between move the index; the check is retried a few
times). Members that agree show the same hash; exits 10 if two members at one
index differ, which means their states diverged.`,
		Example: "  coordctl endpoint hashkv\n  coordctl endpoint hashkv -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			type hj struct {
				Endpoint string `json:"endpoint"`
				ID       string `json:"id"`
				Index    uint64 `json:"applied_index"`
				Hash     string `json:"hash"`
				Error    string `json:"error,omitempty"`
			}
			var js []hj
			var firstErr error // of a member that did not answer
			for try := 0; try < 5; try++ {
				all, err := g.statusAll(ctx)
				if err != nil {
					return err
				}
				// The leader's applied index: its commit index may end in
				// entries that change no state (raft's no-ops), which a
				// leader never hands to its state machine.
				var commit uint64
				if l := leaderOf(all); l != nil {
					commit = l.AppliedIndex
				}
				js = js[:0]
				for _, s := range all {
					j := hj{Endpoint: s.member.GrpcAddr, ID: s.member.Id}
					h, err := g.hashOf(ctx, s.member.GrpcAddr, commit)
					if err != nil {
						j.Error = oneLine(err.Error())
						if firstErr == nil {
							firstErr = err
						}
					} else {
						j.Index, j.Hash = h.AppliedIndex, hex.EncodeToString(h.Digest)
					}
					js = append(js, j)
				}
				if sameIndex := func() bool {
					for _, j := range js {
						if j.Error == "" && j.Index != js[0].Index {
							return false
						}
					}
					return true
				}(); sameIndex {
					break
				}
			}
			byIndex := map[uint64]string{}
			diverged := false
			for _, j := range js {
				if j.Error != "" {
					continue
				}
				if h, ok := byIndex[j.Index]; ok && h != j.Hash {
					diverged = true
				}
				byIndex[j.Index] = j.Hash
			}
			rows := func() ([]string, [][]string) {
				var rows [][]string
				for _, j := range js {
					rows = append(rows, []string{j.Endpoint, j.ID, fmt.Sprint(j.Index), j.Hash, j.Error})
				}
				return []string{"ENDPOINT", "ID", "APPLIED", "HASH", "ERROR"}, rows
			}
			g.show(view{json: js, rows: rows, text: func(w io.Writer) {
				head, r := rows()
				writeTable(w, head, r)
			}})
			if diverged {
				return checkFailed{"members at the same index have different state digests"}
			}
			if !slices.ContainsFunc(js, func(j hj) bool { return j.Error == "" }) && firstErr != nil {
				return firstErr // no member answered (an admin identity missing, say): exit as its error says
			}
			return nil
		},
	}
}

func (g *globals) hashOf(ctx context.Context, addr string, index uint64) (*api.HashKVResponse, error) {
	a, err := g.dialAdmin(addr)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	h, err := a.HashKV(ctx, &api.HashKVRequest{MinIndex: index})
	return h, adminErr("hashkv", addr, err)
}

// snapshotSaveCommand streams a server's state to a file.
func snapshotSaveCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save a server's state to FILE (a snapshot in the servers' own format)",
		Long: `Stream the state of the first server of --servers that answers into FILE: its
applied index and its state machine's snapshot stream, the format of the
servers' raft snapshots.`,
		Example: "  coordctl snapshot save backup.snap",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			a, _, err := g.anyAdmin(ctx)
			if err != nil {
				return err
			}
			defer a.Close()
			stream, err := a.SaveSnapshot(ctx, &api.SaveSnapshotRequest{})
			if err != nil {
				return adminErr("snapshot save", a.addr, err)
			}
			tmp := args[0] + ".part"
			f, err := os.Create(tmp)
			if err != nil {
				return usageError{err}
			}
			defer os.Remove(tmp)
			p := g.progress("snapshot save", "bytes", 0)
			var n int64
			for {
				ch, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					f.Close()
					return adminErr("snapshot save", a.addr, err)
				}
				if _, err := f.Write(ch.Data); err != nil {
					f.Close()
					return err
				}
				n += int64(len(ch.Data))
				p.add(len(ch.Data))
			}
			p.done()
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.Rename(tmp, args[0]); err != nil {
				return err
			}
			return g.show(view{json: map[string]any{"file": args[0], "bytes": n, "server": a.addr}, text: func(w io.Writer) {
				fmt.Fprintf(w, "saved %s from %s to %s\n", nouns(int(n), "byte", "bytes"), a.addr, args[0])
			}})
		},
	}
}

// listenerFlags are the flags of a restored server's other listeners: coord's
// default ports on the raft address's host (the defaults' host is
// 127.0.0.1, which other machines cannot reach).
func listenerFlags(raftAddr string) string {
	host, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return ""
	}
	f := func(port string) string { return net.JoinHostPort(host, port) }
	return fmt.Sprintf("-grpc-addr %s -zk-addr %s -http-addr %s -gossip-addr %s", f("2182"), f("2181"), f("8080"), f("7946"))
}

// snapshotRestoreCommand prepares a data directory for a new cluster from
// a saved snapshot.
func snapshotRestoreCommand(g *globals) *cobra.Command {
	var dataDir, id, raftAddr, logStore string
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Prepare DIR to start a new one-server cluster from a saved snapshot",
		Long: `Check FILE (a snapshot from 'coordctl snapshot save') and write it into the new,
empty data directory DIR as the state of a one-voter cluster of server --id at
--raft-addr. Then start coord on DIR with that id and raft address (no
-bootstrap needed): it elects itself and serves the restored state; add the
other servers with add-voter / add-observer. Works offline: it needs no server.`,
		Example: "  coordctl snapshot restore backup.snap --data-dir /var/lib/coord-new --id s1 --raft-addr 10.0.0.1:2888\n" +
			"  coord -id s1 -data-dir /var/lib/coord-new -raft-addr 10.0.0.1:2888 -grpc-addr 10.0.0.1:2182",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return usageError{errors.New("snapshot restore needs --data-dir")}
			}
			index, digest, err := replica.RestoreDataDir(args[0], dataDir, id, raftAddr, logStore, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				return usageError{err}
			}
			return g.show(view{json: map[string]any{"data_dir": dataDir, "id": id, "raft_addr": raftAddr, "index": index,
				"hash": hex.EncodeToString(digest[:])}, text: func(w io.Writer) {
				fmt.Fprintf(w, "restored %s into %s at index %d (hash %x)\nstart it: coord -id %s -data-dir %s -raft-addr %s %s\n",
					args[0], dataDir, index, digest, id, dataDir, raftAddr, listenerFlags(raftAddr))
			}})
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the new server's data directory (must be empty or absent)")
	cmd.Flags().StringVar(&id, "id", "s1", "the new server's id")
	cmd.Flags().StringVar(&raftAddr, "raft-addr", "127.0.0.1:2888", "the new server's raft address (its -raft-addr)")
	cmd.Flags().StringVar(&logStore, "log-store", replica.DefaultLogStore, "the raft log store the directory gets (its -log-store: bolt or wal)")
	return cmd
}
