package replica

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// A restarted server replays its own log past its snapshot (up to
// replayTo) once the leader says how far it committed. raft's main
// goroutine reads those entries and queues them in batches (up to 128) for
// its FSM goroutine, which applies them one command at a time: the apply
// is the replay's one busy core, and at 10M znodes 40% of it was decoding
// the commands (their paths and data copied into fresh memory, most of that
// page faults) while the reading core waited on it. So during the replay
// the reader decodes each command entry as it reads it (kickingLogStore's
// GetLog), and the apply takes the decoded commands (takeDecoded) instead
// of decoding them again. An entry is decoded from the bytes raft hands
// the apply (the same entry: its index and term), so the state is the
// same either way. Decoded entries wait at most predecodeMax at a time (and
// predecodeMaxBytes of entry data), and none once the replay is over; an entry that does not decode is left to
// the apply, which stops the server on it as before.
type predecoded struct {
	on    atomic.Bool
	until uint64 // replayTo; set before on

	mu    sync.Mutex
	m     map[uint64]decodedEntry
	bytes int // entry data of m

	used atomic.Uint64 // entries applied from their decoded commands
}

// predecodeMax bounds the entries decoded ahead of the apply, and
// predecodeMaxBytes their data. raft reads ahead up to 128 batches of up to
// MaxAppendEntries (1,024) entries, which at 10M znodes (~20 KB of creates
// an entry, 221 MB past the snapshot) is the whole replay; the decoded
// commands are about as large as the entries raft holds meanwhile. What
// raft reads past the bounds the apply decodes itself.
const predecodeMax = 128 * 64

var predecodeMaxBytes = 256 << 20 // a variable for tests

type decodedEntry struct {
	term, size uint64
	cmds       []decodedCmd
}

type decodedCmd struct {
	entryCmd
	cmd *fsm.Command
}

// startPredecode has entries up to until decoded as they are read.
func (r *raftFSM) startPredecode(until uint64) {
	if until == 0 {
		return
	}
	r.pre.until = until
	r.pre.m = map[uint64]decodedEntry{}
	r.pre.on.Store(true)
}

// predecode decodes l if it is a command the replay has yet to apply.
func (r *raftFSM) predecode(l *raft.Log) {
	p := &r.pre
	if !p.on.Load() || l.Type != raft.LogCommand || l.Index > p.until || l.Index <= r.applied.Load() {
		return
	}
	cmds, err := decodeCommands(l.Data)
	if err != nil {
		return
	}
	p.mu.Lock()
	if _, dup := p.m[l.Index]; p.on.Load() && !dup && len(p.m) < predecodeMax && p.bytes+len(l.Data) <= predecodeMaxBytes {
		p.m[l.Index] = decodedEntry{term: l.Term, size: uint64(len(l.Data)), cmds: cmds}
		p.bytes += len(l.Data)
	}
	p.mu.Unlock()
}

// decodeCommands decodes a command entry's data: the apply's decoding,
// and the replay's ahead of it.
func decodeCommands(data []byte) ([]decodedCmd, error) {
	ecs, err := decodeEntry(data)
	if err != nil {
		return nil, err
	}
	cmds := make([]decodedCmd, len(ecs))
	for i, ec := range ecs {
		c, err := fsm.DecodeCommand(ec.cmd)
		if err != nil {
			return nil, err
		}
		cmds[i] = decodedCmd{entryCmd: ec, cmd: c}
	}
	return cmds, nil
}

// takeDecoded returns l's commands decoded ahead, if they were, and forgets
// them.
func (r *raftFSM) takeDecoded(l *raft.Log) ([]decodedCmd, bool) {
	p := &r.pre
	if !p.on.Load() {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.m[l.Index]
	if ok {
		p.drop(l.Index, d)
	}
	if !ok || d.term != l.Term {
		return nil, false
	}
	p.used.Add(1)
	return d.cmds, true
}

// forgetDecoded drops what was decoded for entries up to index (applied,
// or skipped as applied), and ends the decoding once the replay is
// applied.
func (r *raftFSM) forgetDecoded(from, index uint64) {
	p := &r.pre
	if !p.on.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if index >= p.until {
		p.on.Store(false)
		p.m, p.bytes = nil, 0
		r.log.Info("replayed the log this server started with", "to", p.until, "decoded_while_read", p.used.Load())
		return
	}
	if len(p.m) > 0 {
		for i := from; i <= index; i++ {
			if d, ok := p.m[i]; ok {
				p.drop(i, d)
			}
		}
	}
}

// drop forgets entry index's decoded commands; p.mu is held.
func (p *predecoded) drop(index uint64, d decodedEntry) {
	delete(p.m, index)
	p.bytes -= int(d.size)
}
