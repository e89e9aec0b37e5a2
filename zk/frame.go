package zk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrame is the largest frame body ZooKeeper accepts by default:
// jute.maxbuffer, 0xfffff (1 MiB - 1) bytes. ZooKeeper's server rejects a
// length prefix below 0 or above jute.maxbuffer before allocating anything
// and closes the connection; its clients apply the same limit to replies.
// A setData of 1 MiB - 100 bytes or so is therefore the most a default
// ZooKeeper takes, whatever its own data limit says.
const DefaultMaxFrame = 0xfffff

// ErrFrameTooLarge is returned for a length prefix below 0 or above the
// limit. The connection cannot be resynchronised and should be closed.
var ErrFrameTooLarge = errors.New("zk: frame length out of range")

// FrameLength interprets a 4-byte length prefix and checks it against max.
// It does not look for four-letter words: call IsFourLetterWord first on
// the first 4 bytes of a connection.
func FrameLength(prefix []byte, max int) (int, error) {
	if len(prefix) < 4 {
		return 0, fmt.Errorf("zk: length prefix of %d bytes: %w", len(prefix), io.ErrUnexpectedEOF)
	}
	n := int32(binary.BigEndian.Uint32(prefix))
	if n < 0 || int64(n) > int64(max) {
		return 0, fmt.Errorf("%w: %d (limit %d)", ErrFrameTooLarge, n, max)
	}
	return int(n), nil
}

// ReadFrame reads one frame, a 4-byte big-endian length then that many
// bytes, and returns the body. A length below 0 or above max is
// ErrFrameTooLarge, reported without reading or allocating the body. A
// stream that ends inside a frame is io.ErrUnexpectedEOF; one that ends
// cleanly before a frame is io.EOF.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n, err := FrameLength(prefix[:], max)
	if err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// AppendFrame appends the records as one frame: a 4-byte length, then each
// record's encoding in order.
func AppendFrame(dst []byte, records ...Record) []byte {
	e, start := beginFrame(dst)
	for _, r := range records {
		r.Encode(&e)
	}
	return endFrame(e, start)
}

// AppendConnectResponse appends a framed ConnectResponse (it has no
// ReplyHeader).
func AppendConnectResponse(dst []byte, r *ConnectResponse) []byte {
	e, start := beginFrame(dst)
	r.Encode(&e)
	return endFrame(e, start)
}

func beginFrame(dst []byte) (Encoder, int) {
	e := Encoder{b: dst}
	return e, e.BeginFrame()
}

func endFrame(e Encoder, start int) []byte {
	e.EndFrame(start)
	return e.b
}

// fourLetterWords are ZooKeeper 3.8's commands (FourLetterCommands), keyed
// by the int their 4 ASCII bytes make when read as a length prefix.
var fourLetterWords = fourLetterTable()

// telnetClose is the control sequence telnet sends when it closes;
// ZooKeeper knows it as the command "telnet close" and answers nothing.
const telnetClose = 0xfff4fffd

func fourLetterTable() map[uint32]string {
	m := map[uint32]string{telnetClose: "telnet close"}
	for _, w := range []string{"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok",
		"stmk", "srst", "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash"} {
		m[binary.BigEndian.Uint32([]byte(w))] = w
	}
	return m
}

// IsFourLetterWord reports whether the first 4 bytes of a connection are one
// of ZooKeeper 3.8's four-letter commands, and which. ZooKeeper checks this
// only for the first length prefix of a connection, before the handshake:
// the command's bytes read as a big-endian int are the "length". Every
// command's value is above DefaultMaxFrame (or negative), so no real
// handshake can be mistaken for one. After "stmk" the client sends an
// 8-byte trace mask. ZooKeeper runs only whitelisted commands (by default
// just srvr, and isro in read-only mode) and answers the others with
// NotWhitelisted.
func IsFourLetterWord(first4 []byte) (string, bool) {
	if len(first4) < 4 {
		return "", false
	}
	w, ok := fourLetterWords[binary.BigEndian.Uint32(first4)]
	return w, ok
}
