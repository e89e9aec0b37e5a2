package sessions

import (
	"context"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/zxid"
)

// Replica is what the session layer needs of the replica it sits on, and
// all it may use: in a server the raft member (*replica.Replica), in this
// package's transcript tests a fake that applies commands to an fsm.FSM at
// once or when the script says (transcript_test.go).
//
// The Layer is the replica's Observer (replica.Observer): the replica calls
// its Applied after it applies each command, with the apply lock held
// exclusively and before that command's done runs, and its Restored after
// a snapshot replaced the state (also under the lock). Everything the
// layer promises about order rests on that lock and on the methods below:
// an event is queued by Applied, inside apply; a read's reply is queued
// inside Read, with the lock held shared; so a session sees the event of a
// change before any reply that shows the change, and a watch a read
// registers covers every change after the state the read's reply shows.
type Replica interface {
	// Submit hands cmd to the log without waiting (the leader stamps
	// its time, and a createSession's password, before the log). done
	// runs exactly once with the outcome:
	//   - when this server applies the entry that carries cmd: inside
	//     apply, after Observer.Applied for it, with the apply lock held
	//     (so done must be quick and must not call Read or Submit), and
	//     Result.Res is what fsm.Apply returned (a failed command is a
	//     result, Res.Err, not an error);
	//   - with Result.Err wrapping replica.ErrRefused when the command was
	//     refused before the log: nothing changed;
	//   - with any other Result.Err when its fate is unknown to this
	//     server (leadership lost, forward stream broken, the replica
	//     stopping, a snapshot installed); it may still apply elsewhere.
	// In the last two cases done may run before Submit returns. Commands
	// submitted one after another enter the log in that order, which keeps
	// a session's writes in order.
	Submit(cmd *fsm.Command, done func(replica.Result))
	// Propose is Submit and wait: the result of the entry, with its
	// Result.Err as the error, or ctx's error if ctx ends first (the
	// command may still apply).
	Propose(ctx context.Context, cmd *fsm.Command) (replica.Result, error)

	// Read runs f on the current state with the apply lock held shared:
	// f's view is the state after some whole command, and no apply runs
	// until f returns, so a watch f registers fires for every later
	// change, and an event apply queues lands after any reply f queues.
	// f must be quick: applies wait for it.
	Read(f func(v *fsm.View))
	// ReadFresh is Read for a client's read: it may first wait, briefly
	// and never for long (on a follower, for the commits of the commands
	// its log already holds), so that a read after another client's
	// acknowledged write shows it. Replies that need no fresh state (a
	// ping, a refusal) use Read.
	ReadFresh(f func(v *fsm.View))
	// View returns the current state without the apply lock, for lookups
	// that need no order against apply (a session's password).
	View() *fsm.View
	// LastZxid is the zxid of the last command applied here.
	LastZxid() zxid.Zxid

	// SyncIndex returns a log index such that once this server has applied
	// it, it has applied everything the leader had committed when SyncIndex
	// was called (ZooKeeper's sync). It fails when no leader answers.
	SyncIndex(ctx context.Context) (uint64, error)
	// WaitApplied blocks until this server has applied the log up to
	// index (SyncIndex's), and returns nil then; or ctx's error, or an
	// error when the replica stops.
	WaitApplied(ctx context.Context, index uint64) error
	// AppliedChanged returns a channel closed when what this server has
	// applied next moves (LastZxid may then have grown).
	AppliedChanged() <-chan struct{}

	// LeaderWait is how long a request may wait for a leader to appear;
	// the layer's own waits (connect, sync, catching up) are small
	// multiples of it.
	LeaderWait() time.Duration
	// IsLeader reports whether this server leads now: the leader extends
	// a touched session's deadline itself, other servers report the
	// sessions they heard from (Layer.ReportTouches).
	IsLeader() bool
	// Origin names this boot of this server (its id and a nonce). A
	// connection's name in the session table, the owner its commands
	// carry, is Origin() + "/n", so a connection of a new boot is never
	// taken for one of an older boot.
	Origin() string
}

// The raft member is the Replica of every server.
var _ Replica = (*replica.Replica)(nil)
