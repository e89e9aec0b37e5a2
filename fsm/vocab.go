package fsm

import "coord/vocab"

// The shared vocabulary (result codes and the typed error, Stat, ACLs and
// ids, create modes, event types) is defined in package vocab, the leaf every
// layer may import. These aliases keep fsm's names for fsm's own code and its
// callers; new code outside fsm should say vocab.

// Code is vocab.Code: ZooKeeper's result codes.
type Code = vocab.Code

// ZooKeeper 3.8/3.9 error codes (vocab's).
const (
	OK                           = vocab.OK
	SystemError                  = vocab.SystemError
	RuntimeInconsistency         = vocab.RuntimeInconsistency
	DataInconsistency            = vocab.DataInconsistency
	ConnectionLoss               = vocab.ConnectionLoss
	MarshallingError             = vocab.MarshallingError
	Unimplemented                = vocab.Unimplemented
	OperationTimeout             = vocab.OperationTimeout
	BadArguments                 = vocab.BadArguments
	UnknownSession               = vocab.UnknownSession
	NewConfigNoQuorum            = vocab.NewConfigNoQuorum
	ReconfigInProgress           = vocab.ReconfigInProgress
	APIError                     = vocab.APIError
	NoNode                       = vocab.NoNode
	NoAuth                       = vocab.NoAuth
	BadVersion                   = vocab.BadVersion
	NoChildrenForEphemerals      = vocab.NoChildrenForEphemerals
	NodeExists                   = vocab.NodeExists
	NotEmpty                     = vocab.NotEmpty
	SessionExpired               = vocab.SessionExpired
	InvalidCallback              = vocab.InvalidCallback
	InvalidACL                   = vocab.InvalidACL
	AuthFailed                   = vocab.AuthFailed
	SessionMoved                 = vocab.SessionMoved
	NotReadOnly                  = vocab.NotReadOnly
	EphemeralOnLocalSession      = vocab.EphemeralOnLocalSession
	NoWatcher                    = vocab.NoWatcher
	RequestTimeout               = vocab.RequestTimeout
	ReconfigDisabled             = vocab.ReconfigDisabled
	SessionClosedRequireSASLAuth = vocab.SessionClosedRequireSASLAuth
	QuotaExceeded                = vocab.QuotaExceeded
	Throttled                    = vocab.Throttled
)

// Error is vocab.Error: a failed operation's code, operation and path.
type Error = vocab.Error

// errf builds an *Error.
func errf(c Code, op, path string) *Error { return &Error{Code: c, Op: op, Path: path} }

// CodeOf is vocab.CodeOf: the Code carried by err, OK for nil and
// SystemError for an error without one.
func CodeOf(err error) Code { return vocab.CodeOf(err) }

// Stat is vocab.Stat: ZooKeeper's znode Stat.
type Stat = vocab.Stat

// Perm is vocab.Perm: ZooKeeper's ACL permission bits.
type Perm = vocab.Perm

// ZooKeeper's permission bits (vocab's).
const (
	PermRead   = vocab.PermRead
	PermWrite  = vocab.PermWrite
	PermCreate = vocab.PermCreate
	PermDelete = vocab.PermDelete
	PermAdmin  = vocab.PermAdmin
	PermAll    = vocab.PermAll
)

// Id is vocab.Id: a scheme and an id in it.
type Id = vocab.Id

// ACL is vocab.ACL: Perms granted to the identities matching ID.
type ACL = vocab.ACL

// Common ACLs (vocab's; the same slices, not copies).
var (
	AnyoneID      = vocab.AnyoneID
	AuthIDs       = vocab.AuthIDs
	OpenACLUnsafe = vocab.OpenACLUnsafe
	CreatorAllACL = vocab.CreatorAllACL
	ReadACLUnsafe = vocab.ReadACLUnsafe
)

// CreateMode is vocab.CreateMode: ZooKeeper's create flag value.
type CreateMode = vocab.CreateMode

// ZooKeeper's CreateMode flags (vocab's).
const (
	ModePersistent              = vocab.ModePersistent
	ModeEphemeral               = vocab.ModeEphemeral
	ModePersistentSequential    = vocab.ModePersistentSequential
	ModeEphemeralSequential     = vocab.ModeEphemeralSequential
	ModeContainer               = vocab.ModeContainer
	ModePersistentTTL           = vocab.ModePersistentTTL
	ModePersistentSequentialTTL = vocab.ModePersistentSequentialTTL
)

// EventType is vocab.EventType: a watch trigger's type.
type EventType = vocab.EventType

// The event types a change to the tree fires (vocab's).
const (
	EventNodeCreated         = vocab.EventNodeCreated
	EventNodeDeleted         = vocab.EventNodeDeleted
	EventNodeDataChanged     = vocab.EventNodeDataChanged
	EventNodeChildrenChanged = vocab.EventNodeChildrenChanged
)
