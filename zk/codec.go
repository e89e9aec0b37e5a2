package zk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"coord/vocab"
)

// Decoding errors. Every error a Decoder reports wraps one of these, so a
// caller can tell bad input (errors.Is(err, ErrMalformed)) from the rest.
var (
	// ErrMalformed is wrapped by every decoding failure.
	ErrMalformed = errors.New("zk: malformed record")
	// ErrTruncated: the input ends inside a record.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrMalformed)
	// ErrBadLength: a buffer, string or vector length below -1, or larger
	// than the bytes left could hold.
	ErrBadLength = fmt.Errorf("%w: bad length", ErrMalformed)
	// ErrBadMulti: a multi whose op types are unknown or mix reads and writes.
	ErrBadMulti = fmt.Errorf("%w: bad multi", ErrMalformed)
	// ErrUnknownOp: a request type this package has no body for.
	ErrUnknownOp = errors.New("zk: unknown op code")
)

// Record is one jute record: Encode appends its wire form to e; Decode reads
// it from d and returns d.Err().
type Record interface {
	Encode(e *Encoder)
	Decode(d *Decoder) error
}

// Decoder reads jute values from a byte slice. The first failure is sticky:
// later reads return zero values and Err reports it. A Decoder never panics
// and never allocates more than the unread input can justify: a length or
// count is checked against the bytes left before anything is allocated.
// Buffers and strings are copied, so the input may be reused afterwards.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a Decoder reading b from its start.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Remaining returns the number of unread bytes (0 after an error).
func (d *Decoder) Remaining() int {
	if d.err != nil {
		return 0
	}
	return len(d.b) - d.off
}

// Offset returns the number of bytes consumed so far.
func (d *Decoder) Offset() int { return d.off }

// Fail records err (wrapped with the offset) unless an error is already set.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w (at byte %d)", err, d.off)
	}
}

func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.Fail(ErrTruncated)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

// Int32 reads a big-endian int.
func (d *Decoder) Int32() int32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

// Int64 reads a big-endian long.
func (d *Decoder) Int64() int64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// Bool reads one byte; like Java's readBoolean, any non-zero byte is true.
func (d *Decoder) Bool() bool {
	p := d.take(1)
	return p != nil && p[0] != 0
}

// length reads a buffer/string length: -1 is null, anything else must be
// non-negative and fit in the bytes left.
func (d *Decoder) length() (n int, null bool) {
	v := d.Int32()
	if d.err != nil {
		return 0, false
	}
	if v == -1 {
		return 0, true
	}
	if v < 0 || int(v) > len(d.b)-d.off {
		d.off -= 4
		d.Fail(ErrBadLength)
		return 0, false
	}
	return int(v), false
}

// Buffer reads a buffer: nil for null (length -1), a non-nil copy otherwise
// (an empty buffer is []byte{}).
func (d *Decoder) Buffer() []byte {
	n, null := d.length()
	if null || d.err != nil {
		return nil
	}
	p := d.take(n)
	out := make([]byte, n)
	copy(out, p)
	return out
}

// UString reads a ustring. A null string (length -1) reads as "". The bytes
// are taken as they are, without UTF-8 validation: paths are checked by fsm.
func (d *Decoder) UString() string {
	n, null := d.length()
	if null || d.err != nil {
		return ""
	}
	return string(d.take(n))
}

// VectorLen reads a vector count: null is -1 and returns (0, true). minElem
// is the fewest bytes one element can take; a count whose elements could not
// fit in the bytes left is ErrBadLength, so callers may allocate n elements.
func (d *Decoder) VectorLen(minElem int) (n int, null bool) {
	v := d.Int32()
	if d.err != nil {
		return 0, false
	}
	if v == -1 {
		return 0, true
	}
	if minElem < 1 {
		minElem = 1
	}
	if v < 0 || int64(v)*int64(minElem) > int64(len(d.b)-d.off) {
		d.off -= 4
		d.Fail(ErrBadLength)
		return 0, false
	}
	return int(v), false
}

// Strings reads a vector<ustring>: nil for null, a non-nil slice otherwise.
func (d *Decoder) Strings() []string {
	n, null := d.VectorLen(4)
	if null || d.err != nil {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.UString()
	}
	if d.err != nil {
		return nil
	}
	return out
}

// Stat reads a Stat (68 bytes).
func (d *Decoder) Stat() vocab.Stat {
	var s vocab.Stat
	s.Czxid = d.Int64()
	s.Mzxid = d.Int64()
	s.Ctime = d.Int64()
	s.Mtime = d.Int64()
	s.Version = d.Int32()
	s.Cversion = d.Int32()
	s.Aversion = d.Int32()
	s.EphemeralOwner = d.Int64()
	s.DataLength = d.Int32()
	s.NumChildren = d.Int32()
	s.Pzxid = d.Int64()
	return s
}

// ID reads an Id{scheme, id}.
func (d *Decoder) ID() vocab.Id {
	scheme := d.UString()
	return vocab.Id{Scheme: scheme, ID: d.UString()}
}

// ACL reads one ACL{perms, id}.
func (d *Decoder) ACL() vocab.ACL {
	perms := vocab.Perm(d.Int32())
	return vocab.ACL{Perms: perms, ID: d.ID()}
}

// ACLs reads a vector<ACL>: nil for null, a non-nil slice otherwise.
func (d *Decoder) ACLs() []vocab.ACL {
	n, null := d.VectorLen(12)
	if null || d.err != nil {
		return nil
	}
	out := make([]vocab.ACL, n)
	for i := range out {
		out[i] = d.ACL()
	}
	if d.err != nil {
		return nil
	}
	return out
}

// Encoder appends jute values to a byte slice.
type Encoder struct {
	b []byte
}

// NewEncoder returns an Encoder appending to buf (which may be nil).
func NewEncoder(buf []byte) *Encoder { return &Encoder{b: buf} }

// Bytes returns everything appended so far, including the initial buffer.
func (e *Encoder) Bytes() []byte { return e.b }

// Len returns len(e.Bytes()).
func (e *Encoder) Len() int { return len(e.b) }

// Reset makes e append to buf, so that one Encoder can serve a connection
// without allocating.
func (e *Encoder) Reset(buf []byte) { e.b = buf }

// BeginFrame appends a placeholder length prefix and returns its offset, to
// give to EndFrame once the frame's records are appended.
func (e *Encoder) BeginFrame() int {
	start := len(e.b)
	e.b = append(e.b, 0, 0, 0, 0)
	return start
}

// EndFrame fills in the length prefix written by BeginFrame at start.
func (e *Encoder) EndFrame(start int) {
	binary.BigEndian.PutUint32(e.b[start:], uint32(len(e.b)-start-4))
}

// Int32 appends a big-endian int.
func (e *Encoder) Int32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }

// Int64 appends a big-endian long.
func (e *Encoder) Int64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }

// Bool appends 1 or 0.
func (e *Encoder) Bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// Buffer appends a buffer; nil is written as null (-1), as ZooKeeper keeps
// null data apart from empty data.
func (e *Encoder) Buffer(p []byte) {
	if p == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(p)))
	e.b = append(e.b, p...)
}

// UString appends a ustring. Go strings cannot be null; "" is written with
// length 0.
func (e *Encoder) UString(s string) {
	e.Int32(int32(len(s)))
	e.b = append(e.b, s...)
}

// Strings appends a vector<ustring>. A nil slice is written as an empty
// vector, never as null: ZooKeeper never sends a null vector and some clients
// (go-zookeeper) cannot decode one.
func (e *Encoder) Strings(v []string) {
	e.Int32(int32(len(v)))
	for _, s := range v {
		e.UString(s)
	}
}

// Stat appends a Stat.
func (e *Encoder) Stat(s *vocab.Stat) {
	e.Int64(s.Czxid)
	e.Int64(s.Mzxid)
	e.Int64(s.Ctime)
	e.Int64(s.Mtime)
	e.Int32(s.Version)
	e.Int32(s.Cversion)
	e.Int32(s.Aversion)
	e.Int64(s.EphemeralOwner)
	e.Int32(s.DataLength)
	e.Int32(s.NumChildren)
	e.Int64(s.Pzxid)
}

// ID appends an Id.
func (e *Encoder) ID(id vocab.Id) {
	e.UString(id.Scheme)
	e.UString(id.ID)
}

// ACLs appends a vector<ACL>; nil is written as an empty vector (see Strings).
func (e *Encoder) ACLs(v []vocab.ACL) {
	e.Int32(int32(len(v)))
	for _, a := range v {
		e.Int32(int32(a.Perms))
		e.ID(a.ID)
	}
}

// StatSize is the encoded size of a Stat.
const StatSize = 68

// Marshal returns r's encoding.
func Marshal(r Record) []byte { return AppendRecord(nil, r) }

// AppendRecord appends r's encoding to dst.
func AppendRecord(dst []byte, r Record) []byte {
	e := Encoder{b: dst}
	r.Encode(&e)
	return e.b
}

// Unmarshal decodes r from b. Bytes after the record are ignored, as
// ZooKeeper ignores them.
func Unmarshal(b []byte, r Record) error {
	return r.Decode(NewDecoder(b))
}
