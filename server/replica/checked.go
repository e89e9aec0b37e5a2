package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"

	"coord/server/internal/logbridge"
)

// A checked store is the raft log and stable store under DataDir as raft
// and everything else in the replica see them (DESIGN.md invariant 11:
// a server never serves or replicates a file it cannot verify; issue 30).
//
// Reads: raft-wal checks a CRC only over the tail segment's last batch
// when it opens, and bbolt checksums only its meta pages, so a flipped bit
// anywhere else in the log or the stable store came back as data. Every
// entry this store writes carries a checksum record in raft.Log.Extensions
// (raft never uses that field itself; it is middleware space), and every
// stable value a CRC under a key of its own; GetLog, Get and GetUint64
// verify them and refuse what does not match, naming the file.
//
// Writes: after a failed fsync the kernel may have dropped the pages it
// could not write and marked them clean, so a retry that "succeeds" can
// have lost data the disk was said to hold (fsyncgate). raft retries a
// failed append (and panics on a failed term write), so the first write
// that fails, other than on a full disk, fails the store for good and is
// reported once (onFail) before the error reaches raft.

// Errors of a checked store, for errors.Is.
var (
	// ErrCorrupt: an entry or value does not verify against its checksum:
	// the file holding it changed after it was written.
	ErrCorrupt = errors.New("raft store corrupt")
	// ErrStoreFailed: a write failed, or corruption was found; the store
	// takes no more writes.
	ErrStoreFailed = errors.New("raft store failed")
	// ErrExtensionsInUse: an entry handed to the store carries
	// Log.Extensions other than its own checksum record (coord never sets
	// them): the store would have to drop them or go without a checksum.
	ErrExtensionsInUse = errors.New("raft log entry carries Extensions the log store does not own")
)

// corruptHelp is where an operator reads what to do with a corrupt data
// directory; the errors that refuse one end with it.
const corruptHelp = `see docs/deploy.md "A corrupt data directory"`

// CorruptError is an entry or stable value that does not verify.
type CorruptError struct {
	File  string // the file that holds it
	Index uint64 // the log entry's index (Key ""; 0 with Key "": a snapshot)
	Key   string // the stable store's key ("" for a log entry)
	What  string // what is wrong: "fails its checksum", ...
}

func (e *CorruptError) Error() string {
	if e.Key == "" && e.Index == 0 {
		return fmt.Sprintf("snapshot %s %s: the file is corrupt", e.File, e.What)
	}
	if e.Key != "" {
		return fmt.Sprintf("raft stable store %s: key %s %s: the file is corrupt", e.File, e.Key, e.What)
	}
	return fmt.Sprintf("raft log entry %d in %s %s: the file is corrupt", e.Index, e.File, e.What)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// WriteError is the write that failed a store.
type WriteError struct {
	Store string // "raft log store" or "raft stable store"
	Path  string // the store's directory or file
	Err   error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%s %s: write failed: %v; stopping: a failed fsync may have lost data the disk reported written", e.Store, e.Path, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

func (e *WriteError) Is(target error) bool { return target == ErrStoreFailed }

// failedEarlierError refuses a write to a store that failed before.
type failedEarlierError struct {
	store, path string
	first       error
}

func (e *failedEarlierError) Error() string {
	return fmt.Sprintf("%s %s: not written: the store failed earlier (%v)", e.store, e.path, e.first)
}

func (e *failedEarlierError) Unwrap() error { return e.first }

func (e *failedEarlierError) Is(target error) bool { return target == ErrStoreFailed }

const (
	logStoreName    = "raft log store"
	stableStoreName = "raft stable store"
	// recordV1 starts a checksum record (an entry's Extensions, a checked
	// stable value): format 1, a CRC-32C after it. A later format takes
	// another byte, so a reader can tell them apart.
	recordV1 = 0xc1
	// entryRecordLen: the tag and the CRC.
	entryRecordLen = 5
	// checkedPrefix is put before a stable key to name its checked value.
	checkedPrefix = "checked/"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// raft's stable keys (unexported in raft; raft.go).
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// checkedStore is a raft.LogStore and raft.StableStore over the stores
// openLogStore opened (see the comment at the top of this file).
type checkedStore struct {
	logs       raft.LogStore
	stable     raft.StableStore
	kind       string // LogStoreWAL or LogStoreBolt
	logPath    string // wal/ or raft.db
	stablePath string // wal/wal-meta.db or raft.db
	onFail     func(error)
	stages     StageObserver // times each append (StageAppend); nil: none
	// types are the verified entries' types and terms, for raft's startup
	// scan (startscan.go); nil once raft has started.
	types *logTypes

	failOnce sync.Once
	failed   atomic.Pointer[error] // the first failure
	// closed: the stores are closing, so a failed write is no fault of
	// the disk (raft outliving a bounded shutdown, shutdownRaft).
	closed atomic.Bool
}

// newCheckedStore wraps the stores of kind under dataDir; onFail (may be
// nil) is called once, in the failing call, with the first failure.
func newCheckedStore(logs raft.LogStore, stable raft.StableStore, dataDir, kind string, onFail func(error)) *checkedStore {
	s := &checkedStore{logs: logs, stable: stable, kind: kind, onFail: onFail}
	s.logPath = filepath.Join(dataDir, "raft.db")
	s.stablePath = s.logPath
	if kind == LogStoreWAL {
		s.logPath = filepath.Join(dataDir, "wal")
		s.stablePath = filepath.Join(s.logPath, metadb.FileName)
	}
	return s
}

func (s *checkedStore) FirstIndex() (uint64, error) { return s.logs.FirstIndex() }

func (s *checkedStore) LastIndex() (uint64, error) { return s.logs.LastIndex() }

// IsMonotonic passes on raft-wal's refusal of gaps (see kickingLogStore).
func (s *checkedStore) IsMonotonic() bool {
	m, ok := s.logs.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog reads entry index and verifies it; an entry that does not verify
// fails the store (a leader that cannot read an entry would stall the
// followers that need it, a follower its leader).
func (s *checkedStore) GetLog(index uint64, l *raft.Log) error {
	return s.failIfCorrupt(s.getLog(index, l))
}

func (s *checkedStore) getLog(index uint64, l *raft.Log) error {
	if err := s.logs.GetLog(index, l); err != nil {
		if err == raft.ErrLogNotFound {
			return err // raft compares it with ==
		}
		return fmt.Errorf("raft log entry %d in %s cannot be read: %w", index, s.logFile(index), err)
	}
	if what := checkEntry(index, l); what != "" {
		return &CorruptError{File: s.logFile(index), Index: index, What: what}
	}
	return nil
}

// checkEntry verifies l, read as entry index, and strips its record; it
// says what is wrong, or "". An entry with no record was written before
// records were (a data directory of an older coord) and is taken as is.
func checkEntry(index uint64, l *raft.Log) string {
	rec := l.Extensions
	switch {
	case plantedNoVerify:
		// A planted bug (jepsenplanted builds only): nothing verified.
		l.Extensions = nil
		return ""
	case l.Index != index:
		return fmt.Sprintf("holds index %d", l.Index)
	case len(rec) == 0:
		return ""
	case len(rec) != entryRecordLen || rec[0] != recordV1:
		return fmt.Sprintf("has no valid checksum record (%d bytes of extensions)", len(rec))
	case binary.BigEndian.Uint32(rec[1:]) != entrySum(l):
		return "fails its checksum"
	}
	l.Extensions = nil
	return ""
}

// plantedNoVerify is false except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it takes every entry as it reads.
var plantedNoVerify bool

// entrySum is the CRC-32C of what raft reads of an entry: its index, term,
// type and data (not AppendedAt, which raft only reports).
func entrySum(l *raft.Log) uint32 {
	var hdr [25]byte
	binary.BigEndian.PutUint64(hdr[0:], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	binary.BigEndian.PutUint64(hdr[17:], uint64(len(l.Data)))
	return crc32.Update(crc32.Update(0, castagnoli, hdr[:]), castagnoli, l.Data)
}

func (s *checkedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *checkedStore) StoreLogs(logs []*raft.Log) error {
	if err := s.refuseWrite(logStoreName, s.logPath); err != nil {
		return err
	}
	stamped, err := stampEntries(logs)
	if err != nil {
		return err
	}
	start := time.Now()
	err = s.wrote(logStoreName, s.logPath, s.logs.StoreLogs(stamped))
	if s.stages != nil {
		s.stages.ObserveStage(StageAppend, time.Since(start))
	}
	return err
}

// stampEntries returns copies of logs with their checksum records in
// Extensions: the caller's entries stay as they were (raft and the log
// cache hold on to them). An entry that already carries exactly its record
// is taken: an older coord (one that did not strip records) may lead and
// send them; other Extensions are refused.
func stampEntries(logs []*raft.Log) ([]*raft.Log, error) {
	copies := make([]raft.Log, len(logs))
	out := make([]*raft.Log, len(logs))
	recs := make([]byte, entryRecordLen*len(logs))
	for i, l := range logs {
		rec := recs[i*entryRecordLen : (i+1)*entryRecordLen : (i+1)*entryRecordLen]
		rec[0] = recordV1
		binary.BigEndian.PutUint32(rec[1:], entrySum(l))
		if len(l.Extensions) > 0 && !bytes.Equal(l.Extensions, rec) {
			return nil, fmt.Errorf("raft log entry %d: %w", l.Index, ErrExtensionsInUse)
		}
		copies[i] = *l
		copies[i].Extensions = rec
		out[i] = &copies[i]
	}
	return out, nil
}

func (s *checkedStore) DeleteRange(min, max uint64) error {
	if err := s.refuseWrite(logStoreName, s.logPath); err != nil {
		return err
	}
	return s.wrote(logStoreName, s.logPath, s.logs.DeleteRange(min, max))
}

// Set stores val under key's checked key, then under key itself: the plain
// copy keeps the directory right for a coord that predates checked keys
// (a downgrade), which would otherwise read stale terms and votes. Checked
// first, so the checked key is never older than the plain one.
func (s *checkedStore) Set(key, val []byte) error {
	if err := s.refuseWrite(stableStoreName, s.stablePath); err != nil {
		return err
	}
	if err := s.wrote(stableStoreName, s.stablePath, s.stable.Set(checkedKey(key), sealValue(key, val))); err != nil {
		return err
	}
	return s.wrote(stableStoreName, s.stablePath, s.stable.Set(key, val))
}

func (s *checkedStore) SetUint64(key []byte, val uint64) error {
	if err := s.refuseWrite(stableStoreName, s.stablePath); err != nil {
		return err
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	if err := s.wrote(stableStoreName, s.stablePath, s.stable.Set(checkedKey(key), sealValue(key, b[:]))); err != nil {
		return err
	}
	return s.wrote(stableStoreName, s.stablePath, s.stable.SetUint64(key, val))
}

// Get returns key's checked value, verified; a key never written checked
// (a directory of an older coord) reads as the store has it, with the
// store's answer for a key it lacks (raft-boltdb: "not found", which raft
// tests for by its text; raft-wal: no value, no error).
func (s *checkedStore) Get(key []byte) ([]byte, error) {
	val, found, err := s.getChecked(key)
	if err != nil || found {
		return val, s.failIfCorrupt(err)
	}
	return s.stable.Get(key)
}

func (s *checkedStore) GetUint64(key []byte) (uint64, error) {
	val, found, err := s.getChecked(key)
	if err != nil {
		return 0, s.failIfCorrupt(err)
	}
	if !found {
		return s.stable.GetUint64(key)
	}
	if len(val) != 8 {
		return 0, s.failIfCorrupt(&CorruptError{File: s.stablePath, Key: string(key), What: fmt.Sprintf("holds %d bytes, not a number", len(val))})
	}
	return binary.BigEndian.Uint64(val), nil
}

// getChecked reads key's checked value: found false if there is none.
func (s *checkedStore) getChecked(key []byte) ([]byte, bool, error) {
	raw, err := s.stable.Get(checkedKey(key))
	switch {
	case err != nil && notFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("raft stable store %s: key %s cannot be read: %w", s.stablePath, key, err)
	case len(raw) == 0: // raft-wal's answer for a key it lacks
		return nil, false, nil
	}
	val, ok := openValue(key, raw)
	if !ok {
		return nil, false, &CorruptError{File: s.stablePath, Key: string(key), What: "fails its checksum"}
	}
	return val, true, nil
}

// has reports whether key holds a value, checked or plain.
func (s *checkedStore) has(key []byte) (bool, error) {
	if _, found, err := s.getChecked(key); err != nil || found {
		return found, err
	}
	raw, err := s.stable.Get(key)
	if err != nil && !notFound(err) {
		return false, fmt.Errorf("raft stable store %s: key %s cannot be read: %w", s.stablePath, key, err)
	}
	return len(raw) > 0, nil
}

// notFound is raft's own test for a stable key that is not there.
func notFound(err error) bool { return err.Error() == "not found" }

func checkedKey(key []byte) []byte { return append([]byte(checkedPrefix), key...) }

// sealValue is a checked value: the record tag, the value, and a CRC-32C
// over the key, the tag and the value (so a value copied under another key
// does not verify either).
func sealValue(key, val []byte) []byte {
	out := make([]byte, 0, 1+len(val)+4)
	out = append(append(out, recordV1), val...)
	return binary.BigEndian.AppendUint32(out, valueSum(key, out))
}

func valueSum(key, taggedVal []byte) uint32 {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	c := crc32.Update(0, castagnoli, n[:])
	c = crc32.Update(c, castagnoli, key)
	return crc32.Update(c, castagnoli, taggedVal)
}

// openValue verifies a checked value and returns the value in it.
func openValue(key, raw []byte) ([]byte, bool) {
	if len(raw) < 1+4 || raw[0] != recordV1 {
		return nil, false
	}
	body := raw[:len(raw)-4]
	if binary.BigEndian.Uint32(raw[len(raw)-4:]) != valueSum(key, body) {
		return nil, false
	}
	return append([]byte(nil), body[1:]...), true
}

// refuseWrite returns the error of a write to a store that failed before,
// without trying it.
func (s *checkedStore) refuseWrite(store, path string) error {
	if p := s.failed.Load(); p != nil {
		return &failedEarlierError{store: store, path: path, first: *p}
	}
	return nil
}

// wrote passes on the outcome of a write, failing the store if it failed.
// A full disk or quota refuses a write before any page is dirtied, so
// nothing acknowledged is at risk and raft may retry: the server refuses
// writes while space is low (Server.checkDisk) and resumes once it is
// freed.
func (s *checkedStore) wrote(store, path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s %s: %w", store, path, err)
	case s.closed.Load():
		return err
	}
	return s.fail(&WriteError{Store: store, Path: path, Err: err})
}

func (s *checkedStore) failIfCorrupt(err error) error {
	if err != nil && errors.Is(err, ErrCorrupt) {
		return s.fail(err)
	}
	return err
}

// fail fails the store with err and returns it. The first failure is
// reported to onFail; a concurrent failing call waits until that report
// is done, so no write returns to raft before the failure is logged.
func (s *checkedStore) fail(err error) error {
	s.failOnce.Do(func() {
		s.failed.Store(&err)
		if s.onFail != nil {
			s.onFail(err)
		}
	})
	return err
}

// logFile names the file that holds entry index: raft.db, or the wal
// segment whose base index (the first number of its name) is the largest
// at or below index (of two with the same base, the later: names sort by
// base index, then segment id).
func (s *checkedStore) logFile(index uint64) string {
	if s.kind != LogStoreWAL {
		return s.logPath
	}
	names, _ := filepath.Glob(filepath.Join(s.logPath, "*.wal"))
	file := s.logPath
	for _, name := range names {
		base, _, _ := strings.Cut(filepath.Base(name), "-")
		if b, err := strconv.ParseUint(base, 10, 64); err == nil && b <= index {
			file = name
		}
	}
	return file
}

// verify reads every entry of the log and raft's stable values through
// their checksums, and checks that a log with entries has a current term
// (raft writes the term before any entry). It returns how many entries it
// read. It fails nothing: the caller refuses to start instead.
func (s *checkedStore) verify() (uint64, error) {
	first, err := s.logs.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", logStoreName, s.logPath, err)
	}
	last, err := s.logs.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", logStoreName, s.logPath, err)
	}
	var n uint64
	var l raft.Log
	types := newLogTypes(max(first, 1), last)
	for i := max(first, 1); last > 0 && i <= last; i++ {
		// A bolt log may have a gap below a snapshot a follower installed
		// (raft keeps its trailing entries): nothing there to verify.
		if err := s.getLog(i, &l); err == raft.ErrLogNotFound {
			continue
		} else if err != nil {
			return n, err
		}
		types.add(&l)
		n++
	}
	s.types = types
	for _, key := range [][]byte{keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand} {
		if _, _, err := s.getChecked(key); err != nil {
			return n, err
		}
	}
	if has, err := s.has(keyCurrentTerm); err != nil || has || last == 0 {
		return n, err
	}
	return n, &CorruptError{File: s.stablePath, Key: string(keyCurrentTerm),
		What: fmt.Sprintf("is missing while the log holds entries %d..%d", first, last)}
}

// checkStores wraps the stores openLogStore opened and verifies them
// before raft reads them: a data directory that does not verify is
// refused, with the file named.
func (r *Replica) checkStores(logs raft.LogStore, stable raft.StableStore, kind string) (*checkedStore, error) {
	s := newCheckedStore(logs, stable, r.cfg.DataDir, kind, r.storeFailedNow)
	if r.fsm != nil {
		s.stages = r.fsm.stages
	}
	start := time.Now()
	n, err := s.verify()
	if err != nil {
		return nil, fmt.Errorf("server: %w; this server will not serve from it (%s)", err, corruptHelp)
	}
	r.log.Info("raft log verified", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	return s, nil
}

// storeFailedNow is the checked store's onFail: it logs the failure at
// once, in the failing call (raft may panic when the call returns: a failed
// term write), and tells StoreFailed's waiters.
func (r *Replica) storeFailedNow(err error) {
	if errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w; this server will not serve from it (%s)", err, corruptHelp)
	}
	r.log.Error("raft store failed: the server must stop", "err", err)
	r.storeErr = err
	close(r.storeFailed)
}

// StoreFailed returns a channel closed when the raft log or stable store
// under DataDir failed: a write failed (a failed fsync may have lost what
// the disk reported written) or an entry or value did not verify. The
// store takes no more writes and the server should stop (cmd/coord exits);
// StoreErr says why. Never closed with stores handed in (Config.LogStore).
func (r *Replica) StoreFailed() <-chan struct{} { return r.storeFailed }

// StoreErr is why the store failed, or nil while it has not: errors.Is
// ErrCorrupt for an entry or value that did not verify, ErrStoreFailed
// (a *WriteError) for a failed write.
func (r *Replica) StoreErr() error {
	select {
	case <-r.storeFailed:
		return r.storeErr
	default:
		return nil
	}
}

// snapshotsUnreadable says why raft found no snapshot it could load: each
// snapshot that does not open or read back whole (its CRC is checked as it
// opens in raft's file snapshot store, as it is read in durableSnapshots),
// naming its file. Nil if all read back.
func snapshotsUnreadable(dataDir string, snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range list {
		_, rc, err := snaps.Open(m.ID)
		if err == nil {
			// raft's store checks as it opens, durableSnapshots as it is read.
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		if err != nil {
			errs = append(errs, &CorruptError{File: filepath.Join(dataDir, "snapshots", m.ID, "state.bin"), What: "does not verify (" + err.Error() + ")"})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w; this server will not serve from it (%s)", errors.Join(errs...), corruptHelp)
}

// VerifyDataDir reads a data directory's raft log, stable store and
// snapshots back as a starting server does and says what does not verify
// (nil: all of it does); held says whether it holds raft state at all. No
// server may run on the directory meanwhile (it opens the stores).
func VerifyDataDir(dataDir string, log *slog.Logger) (held bool, err error) {
	kind, err := existingLogStore(dataDir)
	if err != nil || kind == "" {
		return false, err
	}
	ls, ss, closer, kind, err := openLogStore(dataDir, kind, log)
	if err != nil {
		return true, err
	}
	defer closer.Close()
	if _, err := newCheckedStore(ls, ss, dataDir, kind, nil).verify(); err != nil {
		return true, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logbridge.HCLog(log, "snapshot"))
	if err != nil {
		return true, err
	}
	return true, snapshotsUnreadable(dataDir, snaps)
}
