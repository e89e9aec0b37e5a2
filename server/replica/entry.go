package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A raft log entry of coord carries one or more encoded fsm.Commands, each
// with the id of the server that proposed it and that server's sequence
// number, so the proposing server can match the applied result to the
// waiting request without depending on when the leader's answer arrives.
// The leader batches the commands that arrive while earlier entries are in
// flight into one entry (proposer.go); they apply in order, each with its own
// zxid, exactly as if each had its own entry.
//
// Format 1 (one command; still read, from older logs):
//
//	1, uvarint len(origin), origin, uvarint seq, command bytes
//
// Format 2 (a batch):
//
//	2, uvarint count, then count times:
//	  uvarint len(origin), origin, uvarint seq, uvarint len(command), command bytes
const (
	entryFormatSingle = 1
	entryFormatBatch  = 2
)

var errBadEntry = errors.New("server: malformed log entry")

// entryCmd is one command of an entry.
type entryCmd struct {
	origin string
	seq    uint64
	cmd    []byte
}

// encodeEntry encodes cmds as one entry (format 2).
func encodeEntry(cmds []entryCmd) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, c := range cmds {
		n += 3*binary.MaxVarintLen64 + len(c.origin) + len(c.cmd)
	}
	b := make([]byte, 0, n)
	b = append(b, entryFormatBatch)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = binary.AppendUvarint(b, uint64(len(c.origin)))
		b = append(b, c.origin...)
		b = binary.AppendUvarint(b, c.seq)
		b = binary.AppendUvarint(b, uint64(len(c.cmd)))
		b = append(b, c.cmd...)
	}
	return b
}

// decodeEntry returns an entry's commands (either format). The command
// bytes alias b.
func decodeEntry(b []byte) ([]entryCmd, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty", errBadEntry)
	}
	format, b := b[0], b[1:]
	switch format {
	case entryFormatSingle:
		c, rest, err := decodeHeader(b)
		if err != nil {
			return nil, err
		}
		c.cmd = rest
		return []entryCmd{c}, nil
	case entryFormatBatch:
		count, k := binary.Uvarint(b)
		// Every command takes at least 3 bytes: a bound before allocating.
		if k <= 0 || count == 0 || count > uint64(len(b)-k)/3 {
			return nil, fmt.Errorf("%w: bad command count", errBadEntry)
		}
		b = b[k:]
		out := make([]entryCmd, 0, count)
		for i := uint64(0); i < count; i++ {
			c, rest, err := decodeHeader(b)
			if err != nil {
				return nil, err
			}
			n, k := binary.Uvarint(rest)
			if k <= 0 || n > uint64(len(rest)-k) {
				return nil, fmt.Errorf("%w: bad command length", errBadEntry)
			}
			c.cmd = rest[k : k+int(n)]
			b = rest[k+int(n):]
			out = append(out, c)
		}
		if len(b) != 0 {
			return nil, fmt.Errorf("%w: %d trailing bytes", errBadEntry, len(b))
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: unknown format %d", errBadEntry, format)
	}
}

// decodeHeader reads a command's origin and sequence number.
func decodeHeader(b []byte) (entryCmd, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return entryCmd{}, nil, fmt.Errorf("%w: bad origin", errBadEntry)
	}
	origin := string(b[k : k+int(n)])
	b = b[k+int(n):]
	seq, k := binary.Uvarint(b)
	if k <= 0 {
		return entryCmd{}, nil, fmt.Errorf("%w: bad sequence number", errBadEntry)
	}
	return entryCmd{origin: origin, seq: seq}, b[k:], nil
}
