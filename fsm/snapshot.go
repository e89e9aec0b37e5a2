package fsm

import (
	"bufio"
	"bytes"
	"coord/vocab"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strings"
)

// Snapshot stream layout. The stream is a sequence of blocks, each a uvarint
// length, that many bytes and their CRC-32C (4 bytes, big endian); a block of
// length 0 ends the stream. Records never span blocks, so a reader checks a
// block's CRC and then parses it from memory. The records, in order:
//
//	header:  magic "COORDSNP", format byte, uvarint epoch, counter, last raft
//	         term, uvarint #znodes, uvarint #sessions
//	session: varint id, varint timeout, bytes password, owner   (by id;
//	         format 1 has no owner)
//	acl:     tag 1, uvarint #entries, (uvarint perms, scheme, id)...
//	znode:   tag 2, name, uvarint acl index, varint czxid mzxid pzxid ctime
//	         mtime owner version cversion aversion, nullable data, uvarint #kids
//	end:     tag 0
//
// Znodes come in pre-order with children sorted by name, so the stream is a
// pure function of the state: equal states give equal bytes, and the digest
// is the SHA-256 of the stream. An ACL record precedes the first znode that
// uses it; znodes refer to ACLs by order of first appearance.
const (
	snapMagic     = "COORDSNP"
	snapFormat    = 2 // 2 added the session owner
	snapBlockSize = 64 << 10
	snapMaxBlock  = 1<<30 + snapBlockSize
	tagEnd        = 0
	tagACL        = 1
	tagNode       = 2
)

// ErrCorruptSnapshot is wrapped by every snapshot reading failure.
var ErrCorruptSnapshot = errors.New("fsm: corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapWriter struct {
	w   io.Writer
	buf []byte
	n   int64
	err error
}

func (sw *snapWriter) endRecord() {
	if len(sw.buf) >= snapBlockSize {
		sw.flush()
	}
}

func (sw *snapWriter) flush() {
	if sw.err != nil || len(sw.buf) == 0 {
		return
	}
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(len(sw.buf)))
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(sw.buf, castagnoli))
	for _, part := range [][]byte{hdr[:h], sw.buf, sum[:]} {
		n, err := sw.w.Write(part)
		sw.n += int64(n)
		if err != nil {
			sw.err = err
			return
		}
	}
	sw.buf = sw.buf[:0]
}

// WriteTo streams the state as a snapshot. It reads only the immutable view,
// so the FSM goes on applying meanwhile.
func (v *View) WriteTo(w io.Writer) (int64, error) {
	return v.writeTo(w, false)
}

// WriteToWithoutPasswords streams the state as WriteTo does, in the same
// format, except that every session's password is left out (written as
// empty): the form of a snapshot that leaves the servers (an operator's
// backup). Restored, it gives the same tree and session table, with
// sessions that no password can re-attach to (a stored password that is
// not session.PasswordLen bytes matches nothing); they expire after their
// timeout.
func (v *View) WriteToWithoutPasswords(w io.Writer) (int64, error) {
	return v.writeTo(w, true)
}

func (v *View) writeTo(w io.Writer, noPasswords bool) (int64, error) {
	sw := &snapWriter{w: w, buf: make([]byte, 0, 2*snapBlockSize)}
	b := append(sw.buf, snapMagic...)
	b = append(b, snapFormat)
	b = binary.AppendUvarint(b, uint64(v.s.clock.Epoch))
	b = binary.AppendUvarint(b, uint64(v.s.clock.Counter))
	b = binary.AppendUvarint(b, v.s.clock.LastTerm)
	b = binary.AppendUvarint(b, uint64(v.s.nodes))
	b = binary.AppendUvarint(b, uint64(v.s.sessions.Len()))
	sw.buf = b
	v.s.sessions.Ascend(func(_ int64, s *session) bool {
		sw.buf = binary.AppendVarint(sw.buf, s.id)
		sw.buf = binary.AppendVarint(sw.buf, int64(s.timeout))
		if noPasswords {
			sw.buf = appendBytes(sw.buf, nil)
		} else {
			sw.buf = appendBytes(sw.buf, s.password)
		}
		sw.buf = appendString(sw.buf, s.owner)
		sw.endRecord()
		return sw.err == nil
	})
	aclIndex := map[string]uint64{}
	var walk func(name string, n *znode) bool
	walk = func(name string, n *znode) bool {
		idx, ok := aclIndex[n.acl.key]
		if !ok {
			idx = uint64(len(aclIndex))
			aclIndex[n.acl.key] = idx
			b := append(sw.buf, tagACL)
			b = binary.AppendUvarint(b, uint64(len(n.acl.acls)))
			for _, a := range n.acl.acls {
				b = binary.AppendUvarint(b, uint64(uint32(a.Perms)))
				b = appendString(b, a.ID.Scheme)
				b = appendString(b, a.ID.ID)
			}
			sw.buf = b
		}
		b := append(sw.buf, tagNode)
		b = appendString(b, name)
		b = binary.AppendUvarint(b, idx)
		for _, x := range [...]int64{n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.owner,
			int64(n.version), int64(n.cversion), int64(n.aversion)} {
			b = binary.AppendVarint(b, x)
		}
		b = appendNullableBytes(b, n.bytes())
		b = binary.AppendUvarint(b, uint64(n.kids.Len()))
		sw.buf = b
		sw.endRecord()
		if sw.err != nil {
			return false
		}
		ok = true
		n.kids.Ascend(func(k string, c *znode) bool {
			ok = walk(k, c)
			return ok
		})
		return ok
	}
	walk("", v.s.root)
	sw.buf = append(sw.buf, tagEnd)
	sw.flush()
	if sw.err == nil {
		var end [1]byte // a zero-length block
		n, err := w.Write(end[:])
		sw.n += int64(n)
		sw.err = err
	}
	return sw.n, sw.err
}

// Digest is the SHA-256 of the state's snapshot stream: two states are equal
// exactly when their digests are.
func (v *View) Digest() [32]byte { return v.digest(false) }

// DigestWithoutPasswords is the SHA-256 of WriteToWithoutPasswords' stream:
// the digest a state restored from that stream has (its Digest).
func (v *View) DigestWithoutPasswords() [32]byte { return v.digest(true) }

func (v *View) digest(noPasswords bool) [32]byte {
	h := sha256.New()
	bw := bufio.NewWriterSize(h, 1<<16)
	v.writeTo(bw, noPasswords) // a hash never fails to write
	bw.Flush()
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// snapReader hands out the checked blocks of a snapshot stream.
type snapReader struct {
	r     *bufio.Reader
	block []byte
	dec   decoder
}

func (sr *snapReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
}

// next loads the next block into the decoder; it returns io.EOF at the
// stream's end marker.
func (sr *snapReader) next() error {
	n, err := binary.ReadUvarint(sr.r)
	if err != nil {
		return sr.corrupt("reading block length: %v", err)
	}
	if n == 0 {
		return io.EOF
	}
	if n > snapMaxBlock {
		return sr.corrupt("block of %d bytes", n)
	}
	if uint64(cap(sr.block)) < n+4 {
		sr.block = make([]byte, n+4)
	}
	b := sr.block[:n+4]
	if _, err := io.ReadFull(sr.r, b); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return sr.corrupt("stream ends inside a block")
		}
		return fmt.Errorf("fsm: reading snapshot: %w", err)
	}
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return sr.corrupt("block checksum mismatch")
	}
	sr.dec = decoder{buf: b[:n]}
	return nil
}

// record makes sure the decoder is positioned at a record.
func (sr *snapReader) record() error {
	if sr.dec.err != nil {
		return sr.corrupt("%v", sr.dec.err)
	}
	if len(sr.dec.buf) == 0 {
		if err := sr.next(); err != nil {
			if err == io.EOF {
				return sr.corrupt("stream ends before its end record")
			}
			return err
		}
	}
	return nil
}

// Restore replaces the whole state with the snapshot read from r. On any
// error the FSM keeps its current state.
func (f *FSM) Restore(r io.Reader) error { return f.RestorePipelined(r, nil) }

// RestorePipelined restores as Restore does, with the stream's decoding
// (reading and checking its blocks, parsing its records, copying out names
// and data) on a goroutine of the caller's while this one builds the tree
// from the decoded records: spawn starts the function it is given on
// another goroutine (nil: decode here too, as Restore does). The result is
// the same either way; on an idle second core the two stages take 0.32 s
// where one goroutine takes 0.37–0.42 s for 1M znodes (BenchmarkRestore).
// The decoding goroutine has ended when RestorePipelined returns, so the
// caller may close r then.
func (f *FSM) RestorePipelined(r io.Reader, spawn func(func())) error {
	f.mu.Lock()
	g := f.gen + 1 // a generation no view has seen
	acls := f.acls
	f.mu.Unlock()

	s, err := readSnapshot(r, g, acls, spawn)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = s
	f.gen = g
	f.freezeLocked()
	f.view = nil // the cached view shows the old state
	return nil
}

func readSnapshot(r io.Reader, g uint64, acls *aclTable, spawn func(func())) (state, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, 1<<16)}
	if err := sr.next(); err != nil {
		if err == io.EOF {
			return state{}, sr.corrupt("empty stream")
		}
		return state{}, err
	}
	d := &sr.dec
	if len(d.buf) < len(snapMagic)+1 || string(d.buf[:len(snapMagic)]) != snapMagic {
		return state{}, sr.corrupt("bad magic")
	}
	format := d.buf[len(snapMagic)]
	if format != 1 && format != snapFormat {
		return state{}, sr.corrupt("unknown format %d", format)
	}
	d.buf = d.buf[len(snapMagic)+1:]
	var s state
	s.clock.Epoch = d.uint32()
	s.clock.Counter = d.uint32()
	s.clock.LastTerm = d.uvarint()
	wantNodes := d.uvarint()
	nSessions := d.uvarint()
	if d.err != nil {
		return state{}, sr.corrupt("header: %v", d.err)
	}
	sessions := make([]bitem[int64, *session], 0, min(nSessions, 1024))
	for i := uint64(0); i < nSessions; i++ {
		if err := sr.record(); err != nil {
			return state{}, err
		}
		sess := &session{gen: g, id: d.varint(), timeout: d.int32(), password: bytes.Clone(d.bytes())}
		if format >= 2 {
			sess.owner = d.string()
		}
		if d.err == nil && len(sessions) > 0 && sess.id <= sessions[len(sessions)-1].k {
			return state{}, sr.corrupt("sessions out of order")
		}
		sessions = append(sessions, bitem[int64, *session]{sess.id, sess})
	}
	// The sessions' last record may be bad: the record decoder checks the
	// decoder's error before its first record.
	rd := &recordDecoder{sr: sr}
	rb := &restoreBuilder{rd: rd, cur: &recBatch{}, g: g, acls: acls, ephemerals: map[int64][]bitem[string, struct{}]{}}
	if spawn != nil {
		rd.out = make(chan *recBatch, recBatches)
		rd.free = make(chan *recBatch, recBatches)
		rd.stop = make(chan struct{})
		for range recBatches - 1 {
			rd.free <- &recBatch{}
		}
		spawn(rd.run)
		defer rb.stopDecoder()
	}
	_, root, err := rb.node("", 0)
	if err != nil {
		return state{}, err
	}
	rec, err := rb.next()
	if err != nil {
		return state{}, err
	}
	if rec.tag != tagEnd {
		return state{}, sr.corrupt("missing end record")
	}
	// The decoder checked the stream's end as it read the end record.
	if uint64(rb.count) != wantNodes {
		return state{}, sr.corrupt("header says %d znodes, stream has %d", wantNodes, rb.count)
	}
	s.root = root
	s.nodes = rb.count
	// The walk meets paths in tree order, which is not string order ("/a/e"
	// comes before "/a-c"): sort before building the path sets.
	s.containers = buildBtree(g, sortedItems(rb.containers))
	s.ttls = buildBtree(g, sortedItems(rb.ttls))
	for _, it := range sessions {
		eph := rb.ephemerals[it.k]
		delete(rb.ephemerals, it.k)
		it.v.ephemerals = buildBtree(g, sortedItems(eph))
	}
	if len(rb.ephemerals) > 0 {
		return state{}, sr.corrupt("ephemeral nodes of %d unknown sessions", len(rb.ephemerals))
	}
	s.sessions = buildBtree(g, sessions)
	return s, nil
}

func sortedItems(items []bitem[string, struct{}]) []bitem[string, struct{}] {
	slices.SortFunc(items, func(a, b bitem[string, struct{}]) int { return strings.Compare(a.k, b.k) })
	return items
}

// snapRecord is an ACL, znode or end record as the record decoder parsed
// it. name and data are the znode's own strings, data "" with null set for
// null data.
type snapRecord struct {
	tag    byte
	null   bool
	name   string
	data   string
	aclIdx uint64
	nkids  uint64
	f      [9]int64 // czxid mzxid pzxid ctime mtime owner version cversion aversion
	acl    []vocab.ACL
}

const (
	recBatchLen = 8192 // records per batch
	recBatches  = 4    // batches in the pipeline (one being decoded, one being built)
)

// recBatch is a run of records in stream order. A batch that ends in the
// end record has end set, and err is what stopped the decoding after recs.
type recBatch struct {
	recs []snapRecord
	end  bool
	halt bool // the last record's tag is unknown: decoding cannot go on
	err  error
}

// recordDecoder parses the stream's ACL, znode and end records. Run on a
// goroutine of its own (run), it hands filled batches to the builder on out
// and takes them back emptied on free, until the end record, an error, or
// the builder's stop; otherwise the builder fills its batch itself.
type recordDecoder struct {
	sr   *snapReader
	out  chan *recBatch
	free chan *recBatch
	stop chan struct{}
}

func (rd *recordDecoder) run() {
	defer close(rd.out)
	for {
		var b *recBatch
		select {
		case b = <-rd.free:
		case <-rd.stop:
			return
		}
		rd.fill(b)
		select {
		case rd.out <- b:
		case <-rd.stop:
			return
		}
		if b.end || b.halt || b.err != nil {
			return
		}
	}
}

// fill decodes the next records into b.
func (rd *recordDecoder) fill(b *recBatch) {
	sr, d := rd.sr, &rd.sr.dec
	b.recs, b.end, b.halt = b.recs[:0], false, false
	for len(b.recs) < recBatchLen {
		if err := sr.record(); err != nil {
			b.err = err
			return
		}
		b.recs = append(b.recs, snapRecord{})
		rec := &b.recs[len(b.recs)-1]
		rec.tag = d.byte()
		switch rec.tag {
		case tagACL:
			n := d.count(3)
			rec.acl = make([]vocab.ACL, n)
			for i := range rec.acl {
				rec.acl[i] = vocab.ACL{Perms: vocab.Perm(d.uint32()), ID: vocab.Id{Scheme: d.string(), ID: d.string()}}
			}
			if d.err != nil {
				b.recs = b.recs[:len(b.recs)-1]
				b.err = sr.corrupt("acl record: %v", d.err)
				return
			}
		case tagNode:
			rec.name = d.string()
			rec.aclIdx = d.uvarint()
			d.varints(rec.f[:])
			data := d.nullableBytes()
			rec.data, rec.null = string(data), data == nil
			rec.nkids = d.uvarint()
			if d.err != nil {
				b.recs = b.recs[:len(b.recs)-1]
				b.err = sr.corrupt("znode record: %v", d.err)
				return
			}
		case tagEnd:
			if d.err != nil || len(d.buf) != 0 {
				b.recs = b.recs[:len(b.recs)-1]
				b.err = sr.corrupt("missing end record")
				return
			}
			// The end record counts only with the stream checked to its
			// end: otherwise the builder gets the error in its place.
			if err := sr.next(); err != io.EOF {
				if err == nil {
					err = sr.corrupt("data after the end record")
				}
				b.err = err
			} else if _, err := sr.r.ReadByte(); err != io.EOF {
				b.err = sr.corrupt("bytes after the end of the stream")
			}
			if b.err != nil {
				b.recs = b.recs[:len(b.recs)-1]
			} else {
				b.end = true
			}
			return
		default:
			// Parsing cannot go on past a record it does not know; the
			// builder says what it expected there.
			b.halt = true
			return
		}
	}
}

// restoreBuilder rebuilds the tree from the pre-order znode records.
type restoreBuilder struct {
	rd         *recordDecoder
	cur        *recBatch // the batch being built from
	pos        int       // the next record in cur
	g          uint64
	acls       *aclTable
	aclList    []*aclList
	count      int
	containers []bitem[string, struct{}]
	ttls       []bitem[string, struct{}]
	ephemerals map[int64][]bitem[string, struct{}]
	// kids[d] collects the children of the znode being read at depth d:
	// buildBtree copies them into the tree's nodes, so the buffer serves
	// every later znode at that depth. A slice per parent grown by append
	// leaves about five times its final size as garbage, which a restore
	// with the collector off takes as fresh memory; where each new page
	// is a costly fault (this project's VMs: ~11 us per 4 KiB) that was a
	// quarter of a 10M-znode restore (8.4 -> 6.2 s).
	kids [][]bitem[string, *znode]
}

// kidBuf returns the children buffer of depth d, emptied.
func (rb *restoreBuilder) kidBuf(d int) []bitem[string, *znode] {
	for len(rb.kids) <= d {
		rb.kids = append(rb.kids, nil)
	}
	return rb.kids[d][:0]
}

// appendKid appends it to kids, doubling the buffer when it is full (the
// garbage of growing it is then at most its final size) but never past
// limit, the count the parent's record claims.
func appendKid(kids []bitem[string, *znode], it bitem[string, *znode], limit uint64) []bitem[string, *znode] {
	if len(kids) == cap(kids) {
		c := uint64(max(2*cap(kids), 64))
		grown := make([]bitem[string, *znode], len(kids), max(min(c, limit), uint64(len(kids)+1)))
		copy(grown, kids)
		kids = grown
	}
	return append(kids, it)
}

// next returns the next record, or what ended the decoding before it.
func (rb *restoreBuilder) next() (*snapRecord, error) {
	for rb.pos >= len(rb.cur.recs) {
		switch {
		case rb.cur.err != nil:
			return nil, rb.cur.err
		case rb.cur.end:
			return nil, rb.rd.sr.corrupt("a record after the end record")
		case rb.cur.halt: // the builder stops at the unknown record first
			return nil, rb.rd.sr.corrupt("a record after an unknown one")
		}
		if rb.rd.out == nil {
			rb.rd.fill(rb.cur)
		} else {
			if rb.cur.recs != nil {
				rb.rd.free <- rb.cur
			}
			b, ok := <-rb.rd.out
			if !ok {
				return nil, rb.rd.sr.corrupt("the decoder stopped")
			}
			rb.cur = b
		}
		rb.pos = 0
	}
	rec := &rb.cur.recs[rb.pos]
	rb.pos++
	return rec, nil
}

// stopDecoder stops a decoder running on its own goroutine and waits for
// it to end, so that nothing reads the stream once the restore returns.
func (rb *restoreBuilder) stopDecoder() {
	close(rb.rd.stop)
	for range rb.rd.out {
	}
}

// node reads one znode record (after any ACL records before it) and its
// subtree. The znode's path is prefix and its name ("/" for the root, at
// depth 0).
func (rb *restoreBuilder) node(prefix string, depth int) (string, *znode, error) {
	sr := rb.rd.sr
	isRoot := depth == 0
	var rec *snapRecord
	for {
		var err error
		if rec, err = rb.next(); err != nil {
			return "", nil, err
		}
		if rec.tag != tagACL {
			break
		}
		rb.aclList = append(rb.aclList, rb.acls.intern(rec.acl))
	}
	if rec.tag != tagNode {
		return "", nil, sr.corrupt("record tag %d where a znode belongs", rec.tag)
	}
	name := rec.name
	// The path is made only where it is kept or reported.
	path := func() string {
		if isRoot {
			return "/"
		}
		return prefix + name
	}
	if rec.aclIdx >= uint64(len(rb.aclList)) {
		return "", nil, sr.corrupt("znode %q refers to ACL %d of %d", path(), rec.aclIdx, len(rb.aclList))
	}
	if (name == "") != isRoot || strings.IndexByte(name, '/') >= 0 {
		return "", nil, sr.corrupt("bad znode name %q under %q", name, path())
	}
	f := &rec.f
	for _, x := range f[6:] {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return "", nil, sr.corrupt("znode %q version out of range", path())
		}
	}
	n := &znode{
		gen: rb.g, acl: rb.aclList[rec.aclIdx], data: rec.data, nullData: rec.null,
		czxid: f[0], mzxid: f[1], pzxid: f[2], ctime: f[3], mtime: f[4], owner: f[5],
		version: int32(f[6]), cversion: int32(f[7]), aversion: int32(f[8]),
	}
	nkids := rec.nkids // rec is reused once the next record is read
	rb.count++
	switch kind, _ := KindOfOwner(n.owner); kind {
	case OwnerContainer:
		rb.containers = append(rb.containers, bitem[string, struct{}]{path(), struct{}{}})
	case OwnerTTL:
		rb.ttls = append(rb.ttls, bitem[string, struct{}]{path(), struct{}{}})
	case OwnerSession:
		if nkids > 0 {
			return "", nil, sr.corrupt("ephemeral %q has children", path())
		}
		rb.ephemerals[n.owner] = append(rb.ephemerals[n.owner], bitem[string, struct{}]{path(), struct{}{}})
	}
	if nkids == 0 {
		return name, n, nil
	}
	if nkids > math.MaxInt32 {
		return "", nil, sr.corrupt("znode %q claims %d children", path(), nkids)
	}
	kidPrefix := "/"
	if !isRoot {
		kidPrefix = path() + "/"
	}
	// A forged count must not allocate: the buffer grows with the
	// children actually read.
	kids := rb.kidBuf(depth)
	for i := uint64(0); i < nkids; i++ {
		cname, c, err := rb.node(kidPrefix, depth+1)
		if err != nil {
			return "", nil, err
		}
		if len(kids) > 0 && cname <= kids[len(kids)-1].k {
			return "", nil, sr.corrupt("children of %q out of order", path())
		}
		kids = appendKid(kids, bitem[string, *znode]{cname, c}, nkids)
	}
	n.kids = buildBtree(rb.g, kids)
	rb.kids[depth] = kids
	return name, n, nil
}
