package vocab

import (
	"errors"
	"fmt"
)

// Code is coord's one error vocabulary. The numeric values are ZooKeeper's
// (KeeperException.Code), so the wire layer sends them unchanged and every
// other front end maps from this one set.
type Code int32

// ZooKeeper 3.8/3.9 error codes.
const (
	OK                           Code = 0
	SystemError                  Code = -1
	RuntimeInconsistency         Code = -2
	DataInconsistency            Code = -3
	ConnectionLoss               Code = -4
	MarshallingError             Code = -5
	Unimplemented                Code = -6
	OperationTimeout             Code = -7
	BadArguments                 Code = -8
	UnknownSession               Code = -12
	NewConfigNoQuorum            Code = -13
	ReconfigInProgress           Code = -14
	APIError                     Code = -100
	NoNode                       Code = -101
	NoAuth                       Code = -102
	BadVersion                   Code = -103
	NoChildrenForEphemerals      Code = -108
	NodeExists                   Code = -110
	NotEmpty                     Code = -111
	SessionExpired               Code = -112
	InvalidCallback              Code = -113
	InvalidACL                   Code = -114
	AuthFailed                   Code = -115
	SessionMoved                 Code = -118
	NotReadOnly                  Code = -119
	EphemeralOnLocalSession      Code = -120
	NoWatcher                    Code = -121
	RequestTimeout               Code = -122
	ReconfigDisabled             Code = -123
	SessionClosedRequireSASLAuth Code = -124
	QuotaExceeded                Code = -125
	Throttled                    Code = -127
)

var codeNames = map[Code]string{
	OK:                           "ok",
	SystemError:                  "system error",
	RuntimeInconsistency:         "runtime inconsistency",
	DataInconsistency:            "data inconsistency",
	ConnectionLoss:               "connection loss",
	MarshallingError:             "marshalling error",
	Unimplemented:                "unimplemented",
	OperationTimeout:             "operation timeout",
	BadArguments:                 "bad arguments",
	UnknownSession:               "unknown session",
	NewConfigNoQuorum:            "new config no quorum",
	ReconfigInProgress:           "reconfig in progress",
	APIError:                     "api error",
	NoNode:                       "node does not exist",
	NoAuth:                       "not authenticated",
	BadVersion:                   "bad version",
	NoChildrenForEphemerals:      "ephemeral nodes may not have children",
	NodeExists:                   "node already exists",
	NotEmpty:                     "node has children",
	SessionExpired:               "session expired",
	InvalidCallback:              "invalid callback",
	InvalidACL:                   "invalid ACL",
	AuthFailed:                   "authentication failed",
	SessionMoved:                 "session moved",
	NotReadOnly:                  "not a read-only call",
	EphemeralOnLocalSession:      "ephemeral on local session",
	NoWatcher:                    "no such watcher",
	RequestTimeout:               "request timeout",
	ReconfigDisabled:             "reconfig disabled",
	SessionClosedRequireSASLAuth: "session closed, SASL auth required",
	QuotaExceeded:                "quota exceeded",
	Throttled:                    "request throttled",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("unknown error code %d", int32(c))
}

// Error makes a Code usable as an error; errors.Is(err, vocab.NoNode) holds
// for any *Error with that code.
func (c Code) Error() string { return c.String() }

// Error is a failed operation: the code, the operation and the path.
type Error struct {
	Code Code
	Op   string // "create", "delete", ... (may be empty)
	Path string // may be empty
}

func (e *Error) Error() string {
	switch {
	case e.Op != "" && e.Path != "":
		return fmt.Sprintf("%s %s: %s", e.Op, e.Path, e.Code)
	case e.Path != "":
		return fmt.Sprintf("%s: %s", e.Path, e.Code)
	case e.Op != "":
		return fmt.Sprintf("%s: %s", e.Op, e.Code)
	}
	return e.Code.String()
}

// Is reports whether target is the same Code, or an *Error with the same Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return e.Code == t.Code
	}
	return false
}

// Unwrap exposes the code so errors.As(err, &code) works.
func (e *Error) Unwrap() error { return e.Code }

// CodeOf returns the Code carried by err: OK for nil, the code of an *Error or
// Code anywhere in its chain, and SystemError for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var c Code
	if errors.As(err, &c) {
		return c
	}
	return SystemError
}
