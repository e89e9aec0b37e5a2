package fsm

import "coord/vocab"

// The size of a znode's data is limited by each server before a command
// reaches the log (ZooKeeper's jute.maxbuffer is also a per-server setting),
// never at apply: a limit is local configuration, and apply depends only on
// the log and the snapshot, so servers configured differently still reach
// the same state from the same log.

// RefuseOversize reports whether cmd carries data larger than max bytes (a
// create or setData, or one inside a multi) and, if so, the result to
// answer with: BadArguments for the op, shaped as apply shapes a failed
// command (a failed multi gives OK for the ops before the refused one and
// RuntimeInconsistency for those after). The result's Zxid is left zero:
// the command never reached the log. It reads no state.
func RefuseOversize(cmd *Command, max int) (Result, bool) {
	oversize := func(op *Op) bool {
		return (op.Type == CmdCreate || op.Type == CmdSetData) && len(op.Data) > max
	}
	switch cmd.Type {
	case CmdCreate, CmdSetData:
		if oversize(&cmd.Op) {
			return Result{Err: errf(vocab.BadArguments, cmd.Type.String(), cmd.Op.Path)}, true
		}
	case CmdMulti:
		for i := range cmd.Ops {
			if !oversize(&cmd.Ops[i]) {
				continue
			}
			results := make([]OpResult, len(cmd.Ops))
			for j := range results {
				results[j] = OpResult{Type: cmd.Ops[j].Type, Code: vocab.OK}
				if j == i {
					results[j].Code = vocab.BadArguments
				} else if j > i {
					results[j].Code = vocab.RuntimeInconsistency
				}
			}
			return Result{Err: &vocab.Error{Code: vocab.BadArguments, Op: "multi", Path: cmd.Ops[i].Path}, Multi: results}, true
		}
	}
	return Result{}, false
}
