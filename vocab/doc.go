// Package vocab holds the words coord's packages and its clients share:
// ZooKeeper's result codes and the typed error, Stat, ACLs and ids with their
// permissions, create modes, watch event types and session states.
//
// These are pure definitions with ZooKeeper's numeric values (a Code is
// KeeperException.Code, a CreateMode is the create flag, a Perm is a
// ZooDefs.Perms bit, an EventType or KeeperState is the WatcherEvent field),
// so the state machine (fsm), the wire codec (zk), the server and the Go
// client speak them unchanged and no front end translates between copies.
// What is done with them (applying commands, checking and fixing up ACLs,
// encoding them on the wire) lives in those packages.
//
// vocab is a leaf: it imports nothing from coord, only the standard library,
// and keeps the rules of the pure packages (no I/O, no clock, no randomness).
//
// # Errors
//
// A failed operation is an *Error{Code, Op, Path}. errors.Is(err, NoNode)
// holds for any *Error with that Code (and for the Code itself), and
// errors.As(err, &code) extracts the Code; CodeOf does the latter with OK for
// nil and SystemError for an error that carries no Code.
package vocab
