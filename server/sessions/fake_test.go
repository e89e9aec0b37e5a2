package sessions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
	"coord/zxid"
)

// fakeReplica is a Replica with no raft, no network and no disk, for the
// transcript tests: one server that leads, whose log is a list in memory.
// A submitted command is stamped as the leader stamps it (the time, and a
// createSession's password, here derived from a counter), goes through the
// log encoding and is applied to a real fsm.FSM, in log order, under an
// exclusive apply lock, with the Observer told as the real replica tells it:
// Applied after each command, then the command's done. It applies each
// command at once, or, while held (hold), when the script says (apply), so a
// script can show what a session sees while its write is in the log and
// not yet applied here. Read runs under the apply lock held shared.
type fakeReplica struct {
	clock *fakeClock
	obs   replica.Observer

	mu  sync.RWMutex // the apply lock: exclusive for apply and restore, shared for reads
	fsm *fsm.FSM     // never replaced: restore reads a snapshot into it

	applyMu sync.Mutex // one apply at a time, in log order

	logMu     sync.Mutex
	pending   []logEntry // in the log, not applied here yet
	submitted uint64     // index of the last entry in the log
	applied   uint64     // index of the last entry applied
	changed   chan struct{}
	hold      bool
	passwords uint64
	refuse    int // the next so many commands fail before the log

	follower atomic.Bool // IsLeader says no (the log still applies here at once)
}

// logEntry is a command in the fake log with its waiting request.
type logEntry struct {
	index uint64
	data  []byte // the command as the log carries it (fsm.Command.Encode)
	done  func(replica.Result)
}

var _ Replica = (*fakeReplica)(nil)

func newFakeReplica(clock *fakeClock) *fakeReplica {
	return &fakeReplica{clock: clock, fsm: fsm.New(), changed: make(chan struct{})}
}

// Submit puts cmd in the log, stamped as the leader stamps it, and applies
// the log unless it is held.
func (f *fakeReplica) Submit(cmd *fsm.Command, done func(replica.Result)) {
	f.logMu.Lock()
	if f.refuse > 0 {
		f.refuse--
		f.logMu.Unlock()
		done(replica.Result{Err: replica.ErrNoLeader})
		return
	}
	cmd.Time = f.clock.Now().UnixMilli()
	if cmd.Type == fsm.CmdCreateSession {
		f.passwords++
		sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, f.passwords))
		cmd.Password = sum[:16]
	}
	f.submitted++
	f.pending = append(f.pending, logEntry{index: f.submitted, data: cmd.Encode(nil), done: done})
	hold := f.hold
	f.logMu.Unlock()
	if !hold {
		f.apply(-1)
	}
}

func (f *fakeReplica) Propose(ctx context.Context, cmd *fsm.Command) (replica.Result, error) {
	ch := make(chan replica.Result, 1)
	f.Submit(cmd, func(r replica.Result) { ch <- r })
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
		return replica.Result{}, ctx.Err()
	}
}

// apply applies the next n entries of the log (n < 0: all of them), each
// as the real replica applies a committed entry: decoded from the log,
// fsm.Apply, the Observer's Applied, then the waiting request's done, all
// under the exclusive apply lock. It returns how many it applied.
func (f *fakeReplica) apply(n int) int {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	count := 0
	for n < 0 || count < n {
		f.logMu.Lock()
		if len(f.pending) == 0 {
			f.logMu.Unlock()
			break
		}
		e := f.pending[0]
		f.pending = f.pending[1:]
		f.logMu.Unlock()

		cmd, err := fsm.DecodeCommand(e.data)
		if err != nil {
			panic(fmt.Sprintf("fake replica: undecodable command: %v", err))
		}
		f.mu.Lock()
		res, triggers := f.fsm.Apply(1, cmd)
		f.obs.Applied(cmd, res, triggers)
		if e.done != nil {
			e.done(replica.Result{Res: res, Index: e.index})
		}
		f.logMu.Lock()
		f.applied = e.index
		close(f.changed)
		f.changed = make(chan struct{})
		f.logMu.Unlock()
		f.mu.Unlock()
		count++
	}
	return count
}

// refuseNext makes the next n submitted commands fail before the log, as
// a leader's full queue or lost leadership fails them.
func (f *fakeReplica) refuseNext(n int) {
	f.logMu.Lock()
	f.refuse = n
	f.logMu.Unlock()
}

// setHold makes submitted commands wait in the log (true) or apply at once
// (false: what waits applies now).
func (f *fakeReplica) setHold(hold bool) {
	f.logMu.Lock()
	f.hold = hold
	f.logMu.Unlock()
	if !hold {
		f.apply(-1)
	}
}

// pendingFor reports whether a command of session id waits in the log.
func (f *fakeReplica) pendingFor(id int64) bool {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	for _, e := range f.pending {
		if cmd, err := fsm.DecodeCommand(e.data); err == nil && cmd.Session == id {
			return true
		}
	}
	return false
}

// pendingCommands are the commands waiting in the log.
func (f *fakeReplica) pendingCommands() []*fsm.Command {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	var out []*fsm.Command
	for _, e := range f.pending {
		cmd, _ := fsm.DecodeCommand(e.data)
		out = append(out, cmd)
	}
	return out
}

// restore installs a snapshot of the current state, as a follower installs
// the leader's: the state streamed out and read back, then the Observer's
// Restored, under the exclusive apply lock.
func (f *fakeReplica) restore() error {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	var buf bytes.Buffer
	if _, err := f.fsm.View().WriteTo(&buf); err != nil {
		return err
	}
	if err := f.fsm.Restore(&buf); err != nil {
		return err
	}
	f.obs.Restored(f.fsm.View())
	return nil
}

func (f *fakeReplica) Read(fn func(v *fsm.View)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.fsm.View())
}

// ReadFresh is Read: this server leads, so nothing it could wait for.
func (f *fakeReplica) ReadFresh(fn func(v *fsm.View)) { f.Read(fn) }

// View and LastZxid need no apply lock: the FSM keeps its own (as the
// real replica's do).
func (f *fakeReplica) View() *fsm.View { return f.fsm.View() }

func (f *fakeReplica) LastZxid() zxid.Zxid { return f.fsm.LastZxid() }

// SyncIndex: everything in the log is committed, so the last entry's.
func (f *fakeReplica) SyncIndex(ctx context.Context) (uint64, error) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.submitted, nil
}

func (f *fakeReplica) WaitApplied(ctx context.Context, index uint64) error {
	for {
		f.logMu.Lock()
		applied, ch := f.applied, f.changed
		f.logMu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeReplica) AppliedChanged() <-chan struct{} {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.changed
}

func (f *fakeReplica) LeaderWait() time.Duration { return 5 * time.Second }
func (f *fakeReplica) IsLeader() bool            { return !f.follower.Load() }
func (f *fakeReplica) Origin() string            { return "fake#1" }

// fakeClock is the session layer's clock (and the leader's, for the
// commands' times), moved by the script alone.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// noMetrics is the session layer's Metrics, counting nothing.
type noMetrics struct{}

func (noMetrics) Request(string, vocab.Code, time.Time)     {}
func (noMetrics) Event()                                    {}
func (noMetrics) Throttled(bool)                            {}
func (noMetrics) ReadOnlySession()                          {}
func (noMetrics) ObserveStage(replica.Stage, time.Duration) {}
func (noMetrics) WatchesRefused(string, int)                {}
