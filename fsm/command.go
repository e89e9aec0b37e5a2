package fsm

import (
	"coord/vocab"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// CmdType numbers the commands of the replicated log. The numbers are part of
// the log format: never reuse or renumber one.
type CmdType uint8

const (
	CmdCreateSession   CmdType = 1 // open a session; its id is the entry's zxid
	CmdCloseSession    CmdType = 2 // close or expire Session, deleting its ephemerals
	CmdCreate          CmdType = 3
	CmdDelete          CmdType = 4
	CmdSetData         CmdType = 5
	CmdSetACL          CmdType = 6
	CmdCheck           CmdType = 7  // version check; useful inside multi
	CmdMulti           CmdType = 8  // Ops, all or nothing
	CmdDeleteContainer CmdType = 9  // leader duty: remove an empty container or an expired TTL node
	CmdAttachSession   CmdType = 10 // the session moved to the connection Owner
	// CmdSetConfig replaces the membership text of /zookeeper/config
	// (Op.Data, the server.N lines); apply appends version=<zxid in hex>.
	// Op.TTL carries the expected config version (-1: any), reconfig's
	// fromConfig. Proposed by servers only, never taken from a client.
	CmdSetConfig CmdType = 11
	cmdTypeEnd   CmdType = 12
)

var cmdNames = [...]string{
	CmdCreateSession: "createSession", CmdCloseSession: "closeSession", CmdCreate: "create",
	CmdDelete: "delete", CmdSetData: "setData", CmdSetACL: "setACL", CmdCheck: "check",
	CmdMulti: "multi", CmdDeleteContainer: "deleteContainer", CmdAttachSession: "attachSession",
	CmdSetConfig: "reconfig",
}

func (t CmdType) String() string {
	if t > 0 && t < cmdTypeEnd {
		return cmdNames[t]
	}
	return fmt.Sprintf("CmdType(%d)", uint8(t))
}

// Command is one entry of the replicated log. Everything apply needs that a
// machine could disagree on (time, the session password, the caller's
// identities) travels inside it.
type Command struct {
	Type CmdType
	// Time is the leader's wall clock in ms since the Unix epoch when it
	// proposed the command; it becomes ctime/mtime and drives TTL expiry.
	Time int64
	// Session is the session issuing the command (0 for the leader's own
	// duties). For CmdCloseSession it is the session to close.
	Session int64
	// Auth holds the caller's authenticated identities for ACL checks.
	Auth []vocab.Id
	// Owner names the client connection that sent the command ("" for the
	// leader's own duties). A session belongs to one connection at a time
	// (set by createSession and attachSession); a client command from any
	// other connection fails with SessionMoved, as in ZooKeeper, so a
	// request still in flight on a connection the client has left cannot
	// take effect after the client moved on.
	Owner string
	// Op is the operation of a single-op command (create … deleteContainer).
	Op Op
	// Ops are the operations of CmdMulti: create, delete, setData and check.
	Ops []Op
	// Timeout (ms, already negotiated) and Password of CmdCreateSession.
	Timeout  int32
	Password []byte
	// EnforceQuota makes apply refuse, with QuotaExceeded, a create or
	// setData (alone or in a multi) that would pass a hard quota limit
	// (quota.go). The leader stamps it from its own setting when it
	// proposes the command, as it stamps Time, so that every server
	// replaying the entry reaches the same verdict whatever its own
	// setting.
	EnforceQuota bool
}

// Op is one znode operation. Which fields matter depends on the type.
type Op struct {
	Type    CmdType // CmdCreate, CmdDelete, CmdSetData, CmdSetACL, CmdCheck, CmdDeleteContainer
	Path    string
	Data    []byte
	ACL     []vocab.ACL
	Mode    vocab.CreateMode
	TTL     int64 // ms, for TTL modes only
	Version int32 // expected version, -1 for any (delete, setData, setACL, check)
}

// commandFormat is the version byte that starts every encoded command. A
// newer server keeps decoding the older versions it knows. Format 2 is
// format 1 with the owner string after the session; a command without an
// owner is still written in format 1, so each command has one encoding.
// Format 3 is format 2 with a uvarint of flags after the owner (which may
// then be empty), written only when a flag is set: a command without flags
// is encoded as before, and entries written before flags existed decode
// with none (EnforceQuota false).
const (
	commandFormat      = 1
	commandFormatOwner = 2
	commandFormatFlags = 3
)

// Command flags (format 3).
const (
	flagEnforceQuota = 1 << 0
	knownFlags       = flagEnforceQuota
)

// minOpBytes is the shortest encoded op: seven one-byte fields.
const minOpBytes = 7

// ErrDecode is wrapped by every command decoding failure.
var ErrDecode = errors.New("fsm: malformed command")

// Encode appends the binary form of c to dst.
//
// Layout (format 1; formats 2 and 3 add fields after the session, see
// commandFormat): version byte, type byte, varint time, varint session,
// uvarint #auth then (scheme, id) strings, then by type: createSession:
// varint timeout, bytes password; multi: uvarint #ops then ops; closeSession:
// nothing; others: one op. An op is: type byte, path, data (nullable: 0 for
// nil, else length+1), uvarint #acl then
// (uvarint perms, scheme, id), uvarint mode, varint ttl, varint version.
// Strings and byte strings are a uvarint length and the bytes.
func (c *Command) Encode(dst []byte) []byte {
	var flags uint64
	if c.EnforceQuota {
		flags |= flagEnforceQuota
	}
	format := byte(commandFormat)
	switch {
	case flags != 0:
		format = commandFormatFlags
	case c.Owner != "":
		format = commandFormatOwner
	}
	dst = append(dst, format, byte(c.Type))
	dst = binary.AppendVarint(dst, c.Time)
	dst = binary.AppendVarint(dst, c.Session)
	if format != commandFormat {
		dst = appendString(dst, c.Owner)
	}
	if format == commandFormatFlags {
		dst = binary.AppendUvarint(dst, flags)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Auth)))
	for _, id := range c.Auth {
		dst = appendString(dst, id.Scheme)
		dst = appendString(dst, id.ID)
	}
	switch c.Type {
	case CmdCreateSession:
		dst = binary.AppendVarint(dst, int64(c.Timeout))
		dst = appendBytes(dst, c.Password)
	case CmdCloseSession, CmdAttachSession:
	case CmdMulti:
		dst = binary.AppendUvarint(dst, uint64(len(c.Ops)))
		for i := range c.Ops {
			dst = c.Ops[i].encode(dst)
		}
	default:
		dst = c.Op.encode(dst)
	}
	return dst
}

func (o *Op) encode(dst []byte) []byte {
	dst = append(dst, byte(o.Type))
	dst = appendString(dst, o.Path)
	dst = appendNullableBytes(dst, o.Data)
	dst = binary.AppendUvarint(dst, uint64(len(o.ACL)))
	for _, a := range o.ACL {
		dst = binary.AppendUvarint(dst, uint64(uint32(a.Perms)))
		dst = appendString(dst, a.ID.Scheme)
		dst = appendString(dst, a.ID.ID)
	}
	dst = binary.AppendUvarint(dst, uint64(uint32(o.Mode)))
	dst = binary.AppendVarint(dst, o.TTL)
	dst = binary.AppendVarint(dst, int64(o.Version))
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendNullableBytes writes nil as 0 and any other b as len(b)+1 and the
// bytes: ZooKeeper keeps null data apart from empty data (zkCli prints
// "null"), so coord does too.
func appendNullableBytes(dst []byte, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// DecodeCommand parses an encoded command. Byte strings in the result
// (Data, Password) alias buf: the caller must not change buf afterwards.
// Any malformed input returns an error wrapping ErrDecode; it never panics.
func DecodeCommand(buf []byte) (*Command, error) {
	d := decoder{buf: buf}
	c := &Command{}
	format := d.byte()
	if d.err == nil && format != commandFormat && format != commandFormatOwner && format != commandFormatFlags {
		return nil, fmt.Errorf("%w: unknown format version %d", ErrDecode, format)
	}
	c.Type = CmdType(d.byte())
	c.Time = d.varint()
	c.Session = d.varint()
	switch format {
	case commandFormatOwner:
		if c.Owner = d.string(); d.err == nil && c.Owner == "" {
			return nil, fmt.Errorf("%w: format %d without an owner", ErrDecode, format)
		}
	case commandFormatFlags:
		c.Owner = d.string()
		flags := d.uvarint()
		if d.err == nil && (flags == 0 || flags&^knownFlags != 0) {
			// No flags is format 1 or 2; an unknown flag would change
			// apply in a way this server cannot follow.
			return nil, fmt.Errorf("%w: format %d with flags %#x (known: %#x, at least one)", ErrDecode, format, flags, knownFlags)
		}
		c.EnforceQuota = flags&flagEnforceQuota != 0
	}
	if n := d.count(2); n > 0 {
		c.Auth = make([]vocab.Id, n)
		for i := range c.Auth {
			c.Auth[i] = vocab.Id{Scheme: d.string(), ID: d.string()}
		}
	}
	switch c.Type {
	case CmdCreateSession:
		c.Timeout = d.int32()
		c.Password = d.bytes()
	case CmdCloseSession, CmdAttachSession:
	case CmdMulti:
		if n := d.count(minOpBytes); n > 0 {
			c.Ops = make([]Op, n)
			for i := range c.Ops {
				d.op(&c.Ops[i])
			}
		}
	case CmdCreate, CmdDelete, CmdSetData, CmdSetACL, CmdCheck, CmdDeleteContainer, CmdSetConfig:
		d.op(&c.Op)
		if d.err == nil && c.Op.Type != c.Type {
			return nil, fmt.Errorf("%w: %v command carries a %v op", ErrDecode, c.Type, c.Op.Type)
		}
	default:
		if d.err == nil {
			return nil, fmt.Errorf("%w: unknown command type %d", ErrDecode, uint8(c.Type))
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.buf) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrDecode, len(d.buf))
	}
	return c, nil
}

// decoder reads the command layout, remembering the first error so callers
// can read a whole record and check once.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrDecode, what)
	}
	d.buf = nil
}

func (d *decoder) byte() byte {
	if len(d.buf) < 1 {
		d.fail("byte")
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// varints reads len(out) varints into out, in one pass over the buffer (a
// snapshot's znode record has nine).
func (d *decoder) varints(out []int64) {
	b := d.buf
	for i := range out {
		ux, n := binary.Uvarint(b)
		if n <= 0 {
			d.fail("varint")
			return
		}
		x := int64(ux >> 1)
		if ux&1 != 0 {
			x = ^x
		}
		out[i] = x
		b = b[n:]
	}
	d.buf = b
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32")
		return 0
	}
	return int32(v)
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail("uint32")
		return 0
	}
	return uint32(v)
}

// count reads a length of things each at least min bytes long, refusing one
// the rest of the buffer cannot hold so a forged count cannot make a huge
// allocation.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.buf)/min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.buf)) {
		d.fail("length")
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	if n == 0 {
		return nil
	}
	return b
}

// nullableBytes reads what appendNullableBytes wrote. An empty result is a
// fresh empty slice, so it does not keep buf alive.
func (d *decoder) nullableBytes() []byte {
	n := d.uvarint()
	switch {
	case d.err != nil:
		return nil
	case n == 0:
		return nil
	case n-1 > uint64(len(d.buf)):
		d.fail("length")
		return nil
	case n == 1:
		return []byte{}
	}
	b := d.buf[: n-1 : n-1]
	d.buf = d.buf[n-1:]
	return b
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) op(o *Op) {
	o.Type = CmdType(d.byte())
	o.Path = d.string()
	o.Data = d.nullableBytes()
	if n := d.count(3); n > 0 {
		o.ACL = make([]vocab.ACL, n)
		for i := range o.ACL {
			o.ACL[i] = vocab.ACL{Perms: vocab.Perm(d.uint32()), ID: vocab.Id{Scheme: d.string(), ID: d.string()}}
		}
	}
	o.Mode = vocab.CreateMode(d.uint32())
	o.TTL = d.varint()
	o.Version = d.int32()
}
