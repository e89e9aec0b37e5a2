package session

import (
	"crypto/subtle"
	"fmt"
	"io"
)

// PasswordLen is the length of a session password in bytes, as in ZooKeeper.
const PasswordLen = 16

// GeneratePassword reads PasswordLen bytes from rand. The leader calls it with
// crypto/rand.Reader when it builds a createSession entry; the bytes travel in
// the entry, so no server ever needs to regenerate them. (ZooKeeper instead
// seeds a PRNG with the session id XOR a server secret, which needs that
// secret on every server and makes the password predictable to anyone who
// learns it.) Tests pass a deterministic reader.
func GeneratePassword(rand io.Reader) ([]byte, error) {
	p := make([]byte, PasswordLen)
	if _, err := io.ReadFull(rand, p); err != nil {
		return nil, fmt.Errorf("session: generate password: %w", err)
	}
	return p, nil
}

// CheckPassword reports whether given matches stored. The comparison takes the
// same time wherever the first differing byte is, so a client re-attaching to
// a session cannot learn the password byte by byte. A stored password of the
// wrong length matches nothing (an empty one, as a snapshot saved without
// passwords restores it, must not let an empty guess in), and neither does an
// all-zero one, which a client could guess.
func CheckPassword(stored, given []byte) bool {
	if len(stored) != PasswordLen {
		return false
	}
	var any byte
	for _, b := range stored {
		any |= b
	}
	return any != 0 && subtle.ConstantTimeCompare(stored, given) == 1
}
