package server

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A raft log entry of coord is an envelope around an encoded fsm.Command:
// the id of the server that proposed it and that server's sequence number,
// so the proposing server can match the applied result to the waiting
// request without depending on when the leader's answer arrives.
//
//	format byte (1), uvarint len(origin), origin, uvarint seq, command bytes
const entryFormat = 1

var errBadEntry = errors.New("server: malformed log entry")

func encodeEntry(origin string, seq uint64, cmd []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64*2+len(origin)+len(cmd))
	b = append(b, entryFormat)
	b = binary.AppendUvarint(b, uint64(len(origin)))
	b = append(b, origin...)
	b = binary.AppendUvarint(b, seq)
	return append(b, cmd...)
}

func decodeEntry(b []byte) (origin string, seq uint64, cmd []byte, err error) {
	if len(b) < 1 || b[0] != entryFormat {
		return "", 0, nil, fmt.Errorf("%w: unknown format", errBadEntry)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", 0, nil, fmt.Errorf("%w: bad origin", errBadEntry)
	}
	origin = string(b[k : k+int(n)])
	b = b[k+int(n):]
	seq, k = binary.Uvarint(b)
	if k <= 0 {
		return "", 0, nil, fmt.Errorf("%w: bad sequence number", errBadEntry)
	}
	return origin, seq, b[k:], nil
}
