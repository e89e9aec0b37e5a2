package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/vocab"
)

// Exit codes. Scripts can tell a missing node from a lost race from a dead
// cluster without parsing messages.
const (
	exitOK          = 0
	exitError       = 1  // any other failure
	exitUsage       = 2  // bad flags, arguments, config or input file
	exitUnreachable = 3  // no server answered
	exitNoNode      = 4  // vocab.NoNode
	exitNodeExists  = 5  // vocab.NodeExists
	exitBadVersion  = 6  // vocab.BadVersion
	exitNotEmpty    = 7  // vocab.NotEmpty
	exitNoAuth      = 8  // vocab.NoAuth, vocab.AuthFailed; an Admin call refused for want of an admin identity
	exitTimeout     = 9  // --command-timeout passed
	exitCheckFailed = 10 // a check (endpoint health) found a fault
)

// usageError is a mistake in how coordctl was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// unreachableError says no server answered.
type unreachableError struct {
	servers []string
	err     error
}

func (e unreachableError) Error() string {
	why := "no answer"
	if e.err != nil {
		why = e.err.Error()
		if s, ok := status.FromError(e.err); ok {
			why = s.Message()
		}
		// gRPC's transport wraps the dial error in quoted layers; the dial
		// error itself says what happened.
		if i := strings.LastIndex(why, "dial tcp"); i >= 0 {
			why = strings.TrimRight(why[i:], `"`)
		}
	}
	return fmt.Sprintf("no server answered at %s: %s", strings.Join(e.servers, ","), why)
}
func (e unreachableError) Unwrap() error { return e.err }

// checkFailed is a check that ran and found a fault.
type checkFailed struct{ msg string }

func (e checkFailed) Error() string { return e.msg }

// exitCode maps an error to the process's exit code.
func exitCode(err error) int {
	var ue usageError
	var ur unreachableError
	var cf checkFailed
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ur):
		return exitUnreachable
	case errors.As(err, &cf):
		return exitCheckFailed
	case errors.Is(err, vocab.NoNode):
		return exitNoNode
	case errors.Is(err, vocab.NodeExists):
		return exitNodeExists
	case errors.Is(err, vocab.BadVersion):
		return exitBadVersion
	case errors.Is(err, vocab.NotEmpty):
		return exitNotEmpty
	case errors.Is(err, vocab.NoAuth), errors.Is(err, vocab.AuthFailed):
		return exitNoAuth
	case errors.Is(err, context.DeadlineExceeded):
		return exitTimeout
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.NotFound: // sessions kill of a session that is gone
			return exitNoNode
		case codes.Unavailable:
			return exitUnreachable
		case codes.DeadlineExceeded:
			return exitTimeout
		case codes.Unauthenticated, codes.PermissionDenied: // an Admin call without an admin identity
			return exitNoAuth
		}
	}
	return exitError
}

// adminErr turns a gRPC status from the Admin service into a plain
// one-line error that keeps the status for exitCode.
func adminErr(op, server string, err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return grpcError{op: op, server: server, st: s}
	}
	return fmt.Errorf("%s at %s: %w", op, server, err)
}

type grpcError struct {
	op, server string
	st         *status.Status
}

func (e grpcError) Error() string {
	return fmt.Sprintf("%s at %s: %s", e.op, e.server, e.st.Message())
}

// GRPCStatus lets status.FromError see through the wrapper.
func (e grpcError) GRPCStatus() *status.Status { return e.st }
