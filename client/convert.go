package client

import (
	"errors"
	"fmt"

	"coord/api"
	"coord/vocab"
)

// ErrClosed is returned by calls on a Conn after Close.
var ErrClosed = errors.New("coord: connection closed")

// AnyVersion matches any version in Delete, Set, SetACL and CheckOp.
const AnyVersion int32 = -1

// codeErr turns a response code into the error a call returns: nil for OK,
// else a *vocab.Error, so errors.Is(err, vocab.NoNode) works.
func codeErr(code int32, op, path string) error {
	if vocab.Code(code) == vocab.OK {
		return nil
	}
	return &vocab.Error{Code: vocab.Code(code), Op: op, Path: path}
}

// ctxErr wraps a context error with the call it ended.
func ctxErr(op, path string, err error) error {
	if path == "" {
		return fmt.Errorf("coord: %s: %w", op, err)
	}
	return fmt.Errorf("coord: %s %s: %w", op, path, err)
}

func createToAPI(path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL, ttlMs int64) *api.CreateRequest {
	return &api.CreateRequest{
		Path:     path,
		Data:     data,
		NullData: data == nil,
		Acl:      api.ACLToAPI(acl),
		Mode:     int32(mode),
		Ttl:      ttlMs,
	}
}

func setDataToAPI(path string, data []byte, version int32) *api.SetDataRequest {
	return &api.SetDataRequest{Path: path, Data: data, NullData: data == nil, Version: version}
}
