// Package session holds the parts of ZooKeeper sessions that live outside the
// replicated session table (which is fsm's): negotiating a session timeout,
// tracking when sessions are due to expire, and generating and checking
// session passwords. It owns no network, no raft, no goroutine, and reads no
// wall clock except through the Clock it is given; SystemClock is the only
// code in this package that calls time.Now.
//
// Timeouts. A client asks for a timeout in milliseconds; Bounds.Negotiate clamps
// it into [Min, Max] the way ZooKeeper's processConnectRequest does (raise to
// Min first, then lower to Max). By default Min is 2 ticks and Max 20 ticks,
// ZooKeeper's minSessionTimeout and maxSessionTimeout defaults. The negotiated
// value is what the leader writes into the createSession entry, so every server
// agrees on it.
//
// Expiry. Only the leader expires sessions, and it does so by committing a
// closeSession entry; the Tracker is how it decides when. Like ZooKeeper's
// ExpiryQueue, the Tracker files each session in a bucket whose deadline is
// now+timeout rounded up to the next multiple of the tick, so the leader wakes
// once per tick rather than once per session, and a session may live up to one
// tick longer than its timeout but never less. Expired hands back the sessions
// whose bucket deadline has passed, in ascending id order so the leader proposes
// closes in a deterministic order, and marks them closing: they stay tracked
// (so touches are refused and the connection can answer SessionExpired) until
// the committed closeSession calls Remove. A new leader calls ResetAll so every
// session gets a full timeout from the moment it took over, because the old
// leader's heartbeat records died with it.
//
// Passwords. A session's password is 16 bytes, as in ZooKeeper. ZooKeeper
// derives it from the session id and a server secret so any server can
// recompute it; coord instead has the leader draw random bytes
// (GeneratePassword with crypto/rand) and carry them in the createSession entry,
// so the password is part of the replicated table and no secret has to be shared
// among servers. CheckPassword compares in constant time.
//
// Invariants kept here:
//   - a session is never reported expired before its deadline, and its deadline
//     is never earlier than now+timeout at its last Add, Touch or ResetAll;
//   - Expired is deterministic: same tracker state and now give the same ids in
//     the same (ascending) order;
//   - a closing session cannot be touched back to life; only ResetAll (a new
//     leader) or Remove ends the closing state;
//   - a password is accepted only if it is exactly PasswordLen bytes and equal
//     to the stored one; an empty stored password matches nothing.
package session
