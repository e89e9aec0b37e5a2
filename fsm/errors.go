package fsm

import "coord/vocab"

// errf builds a *vocab.Error.
func errf(c vocab.Code, op, path string) *vocab.Error {
	return &vocab.Error{Code: c, Op: op, Path: path}
}
