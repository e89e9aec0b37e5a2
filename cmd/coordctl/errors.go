package main

import (
	"context"
	"errors"
	"fmt"
	"path"
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

// unreachableError says no server answered, or, with a hint, what
// answered instead (conn.go's portHint).
type unreachableError struct {
	servers []string
	err     error
	hint    string
}

func (e unreachableError) Error() string {
	if e.hint != "" {
		return e.hint
	}
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

// describe is err's message for the one line coordctl prints, with a NoAuth
// said in words: whose ACL refused the operation.
func describe(err error) string {
	msg := err.Error()
	var ve *vocab.Error
	if errors.As(err, &ve) && ve.Code == vocab.NoAuth && ve.Path != "" {
		msg = strings.Replace(msg, ve.Error(), noAuthText(ve), 1)
	}
	return msg
}

// noAuthText names the ACL that refused e: create and delete need a
// permission on the parent (CREATE, DELETE), the other operations on the
// node itself; a multi's failed operation may be either.
func noAuthText(e *vocab.Error) string {
	where := e.Path
	switch e.Op {
	case "create", "delete":
		where = path.Dir(e.Path)
	case "multi":
		where = fmt.Sprintf("%s or of its parent", e.Path)
	}
	op := e.Op + " "
	if e.Op == "" {
		op = ""
	}
	return fmt.Sprintf("%s%s: not allowed by the ACL of %s (NoAuth)", op, e.Path, where)
}

// defaultMaxDataBytes is the largest znode data a coord server takes
// unless started with another -max-data-bytes (server.DefaultMaxDataBytes,
// ZooKeeper's jute.maxbuffer). The servers do not tell clients their
// setting, so coordctl does not refuse larger data itself: it explains the
// server's refusal.
const defaultMaxDataBytes = 1 << 20

// dataTooLarge is a write the server refused for the size of its data.
type dataTooLarge struct {
	err *vocab.Error // the server's: BadArguments, or ConnectionLoss
	n   int
}

func (e dataTooLarge) Error() string {
	what := strings.TrimSpace(e.err.Op + " " + e.err.Path)
	return fmt.Sprintf("%s: data is %d bytes; the servers take at most %d unless started with a larger -max-data-bytes (ZooKeeper's jute.maxbuffer)",
		what, e.n, defaultMaxDataBytes)
}
func (e dataTooLarge) Unwrap() error { return e.err }

// oversize explains err if a write's data was too large for the server:
// a server refuses data over its -max-data-bytes with BadArguments, and
// drops the connection of a request larger than it reads at all (the
// limit and 64 KiB), which the client reports as ConnectionLoss. size
// gives the data length of the write at a path (a multi's failed one; ""
// when the server named none: the largest).
func oversize(err error, size func(path string) int) error {
	var ve *vocab.Error
	if !errors.As(err, &ve) || (ve.Code != vocab.BadArguments && ve.Code != vocab.ConnectionLoss) {
		return err
	}
	if n := size(ve.Path); n > defaultMaxDataBytes {
		return dataTooLarge{err: ve, n: n}
	}
	return err
}
