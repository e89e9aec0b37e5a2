// Package forgetfs is a FUSE filesystem that forgets what was not synced,
// as a machine that loses power does. Mounted over a server's data
// directory, it passes every read and write through to a backing
// directory at once, and keeps, in memory, how to undo each change that
// no fsync has made durable yet:
//
//   - a write or a truncation of a file, until an fsync of that file;
//   - a new, removed or renamed directory entry, until an fsync of the
//     directory that holds it (both directories, for a rename), as POSIX
//     asks (a file's own fsync does not make its name durable).
//
// PowerLoss, with the mount's users gone (the server killed), unmounts
// and undoes those changes, newest first, so the backing directory holds
// what a disk would after a power cut; Torn keeps a prefix of the last
// unsynced write instead of dropping all of it. Mount again to restart
// the server on what is left. FailFsync makes fsync fail with EIO.
//
// A replaced or removed file's data stays reachable for the undo through
// a hard link in a stash directory beside the backing one (same
// filesystem), removed once the change is durable.
package forgetfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mount of a backing directory.
type FS struct {
	backing    string
	stash      string
	mountpoint string
	server     *fuse.Server

	mu        sync.Mutex
	log       []*change // unsynced changes, oldest first
	stashSeq  int
	failFsync bool
	fsyncs    int // fsyncs seen (files and directories)

	// A power cut armed by CutAt: the write it waits for, what it tells,
	// and once it happened, the write it cut after and the channel the
	// writes and fsyncs after it wait on until PowerLoss.
	cutMatch func(path string) bool
	cutTell  chan string
	cutAfter *change
	frozen   chan struct{}
	dead     bool // thawed after a cut: every write and fsync fails until PowerLoss
}

type kind int

const (
	kWrite    kind = iota // bytes of file ino replaced or appended
	kTruncate             // file ino's size changed by truncate or fallocate
	kCreate               // a new entry name in dir (a file, link or symlink)
	kMkdir                // a new directory name in dir
	kUnlink               // entry name removed from dir (its data in stash)
	kRmdir                // empty directory name removed from dir
	kRename               // dir/name moved to dir2/name2 (a replaced target in stash)
)

// change is how to undo one unsynced change.
type change struct {
	kind kind
	ino  uint64 // the file (write, truncate)
	// write and truncate: the file's size before, and the bytes the
	// change replaced (from off, as far as the old size reached).
	off     int64
	old     []byte
	oldSize int64
	newLen  int // write: how many bytes it wrote

	dir, dir2   uint64 // the directories (by backing inode) of an entry change
	name, name2 string
	stash       string // a removed or replaced file's link in the stash
	mode        uint32 // rmdir: the directory's mode
	synced      map[uint64]bool
}

// durableOnSync reports, for an fsync of ino, whether the change is now
// durable.
func (c *change) durableOnSync(ino uint64) bool {
	switch c.kind {
	case kWrite, kTruncate:
		return c.ino == ino
	}
	if c.dir == ino || (c.kind == kRename && c.dir2 == ino) {
		if c.synced == nil {
			c.synced = map[uint64]bool{}
		}
		c.synced[ino] = true
	}
	if c.kind == kRename {
		return c.synced[c.dir] && c.synced[c.dir2]
	}
	return c.synced[c.dir]
}

// Mount mounts a filesystem at mountpoint that passes through to backing
// (both must exist; the stash is backing + ".stash").
func Mount(mountpoint, backing string) (*FS, error) {
	f := &FS{backing: filepath.Clean(backing), mountpoint: mountpoint}
	f.stash = f.backing + ".stash"
	if err := os.MkdirAll(f.stash, 0o755); err != nil {
		return nil, err
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return err
	}
	root := &gofs.LoopbackRoot{Path: f.backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *gofs.LoopbackRoot, parent *gofs.Inode, name string, st *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, fs: f}
	}
	rn := &node{LoopbackNode: gofs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rn
	zero := time.Duration(0)
	srv, err := gofs.Mount(f.mountpoint, rn, &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        "forgetfs",
			Name:          "forgetfs",
			DirectMount:   true,
			AllowOther:    true,
			DisableXAttrs: true,
		},
		// No kernel caching of attributes or entries: after a power loss
		// the mount is new anyway, but a server's reads must see its own
		// writes' sizes at once.
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
	})
	if err != nil {
		return fmt.Errorf("forgetfs: mounting %s over %s: %w", f.mountpoint, f.backing, err)
	}
	f.server = srv
	return nil
}

// Unmount unmounts the filesystem, keeping what it has not synced (a
// later PowerLoss can still undo it). The kernel lets go of a killed
// process's files a moment after it is reaped, so a busy mount is tried
// again for up to 5 s.
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	var err error
	for k := 0; k < 50; k++ {
		if err = f.server.Unmount(); err == nil {
			f.server = nil
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("forgetfs: unmounting %s: %w", f.mountpoint, err)
}

// Remount mounts the filesystem again after Unmount or PowerLoss.
func (f *FS) Remount() error {
	if f.server != nil {
		return errors.New("forgetfs: mounted already")
	}
	return f.mount()
}

// Unsynced is how many changes no fsync has made durable.
func (f *FS) Unsynced() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.log)
}

// Fsyncs is how many fsyncs (of files and directories) the filesystem
// has seen.
func (f *FS) Fsyncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fsyncs
}

// FailFsync makes every fsync from now on fail with EIO (and make
// nothing durable), or stops that.
func (f *FS) FailFsync(fail bool) {
	f.mu.Lock()
	f.failFsync = fail
	f.mu.Unlock()
}

// Loss is what a power loss keeps of the unsynced changes.
type Loss struct {
	// Torn keeps a random prefix (possibly empty, never all) of the last
	// unsynced write, as a write the power cut in the middle of.
	Torn bool
	// Rand picks the prefix; nil means a fixed seed.
	Rand *rand.Rand
}

// Lost is what a power loss undid.
type Lost struct {
	// Undone counts the changes undone (a torn write counts as one).
	Undone int
	// Torn names the write kept in part ("" if none): its file, relative
	// to the backing directory, and how many of its bytes were kept.
	Torn string
	// What counts the changes undone by kind and file, e.g. "2 writes
	// of wal/0001.wal", "1 create in snapshots", in the order first seen.
	What []string
}

var kindNames = [...]string{kWrite: "write", kTruncate: "truncate", kCreate: "create", kMkdir: "mkdir",
	kUnlink: "unlink", kRmdir: "rmdir", kRename: "rename"}

// summary counts changes by kind and file (writes, truncations) or
// directory (entry changes).
func (f *FS) summary(log []*change) []string {
	paths, _ := f.paths()
	rel := func(ino uint64) string {
		p, ok := paths[ino]
		if !ok {
			return "?"
		}
		if r, err := filepath.Rel(f.backing, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return "?"
	}
	var order []string
	count := map[string]int{}
	for _, c := range log {
		where := " of " + rel(c.ino)
		if c.kind != kWrite && c.kind != kTruncate {
			where = " in " + rel(c.dir)
		}
		key := kindNames[c.kind] + where
		if count[key] == 0 {
			order = append(order, key)
		}
		count[key]++
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = fmt.Sprintf("%d %s", count[k], k)
	}
	return out
}

// PowerLoss unmounts (the processes using the mount must be gone) and
// undoes every change no fsync made durable, newest first.
func (f *FS) PowerLoss(l Loss) (Lost, error) {
	var lost Lost
	f.Thaw()
	if err := f.Unmount(); err != nil {
		return lost, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.cutMatch, f.cutTell, f.cutAfter, f.dead = nil, nil, nil, false }()
	r := l.Rand
	if r == nil {
		r = rand.New(rand.NewSource(1))
	}
	torn := -1
	for i, c := range f.log {
		if l.Torn && c == f.cutAfter && c.newLen > 1 {
			torn = i
		}
	}
	if l.Torn && torn < 0 {
		for i := len(f.log) - 1; i >= 0; i-- {
			if f.log[i].kind == kWrite && f.log[i].newLen > 1 {
				torn = i
				break
			}
		}
	}
	lost.What = f.summary(f.log)
	n := len(f.log)
	for i := len(f.log) - 1; i >= 0; i-- {
		keep := 0
		if i == torn {
			keep = r.Intn(f.log[i].newLen)
			lost.Torn = fmt.Sprintf("%s: kept %d of %d bytes written at %d", f.rel(f.log[i].ino), keep, f.log[i].newLen, f.log[i].off)
		}
		if err := f.undo(f.log[i], keep); err != nil {
			return lost, fmt.Errorf("forgetfs: undoing change %d of %d: %w", i+1, n, err)
		}
		lost.Undone++
	}
	f.log = nil
	return lost, nil
}

// CutAt arms a power cut at the next write to a file whose path (relative
// to the backing directory, as it was named when opened) satisfies match:
// that write reaches the backing directory, and every write and fsync
// after it waits, as on a machine that stopped, until PowerLoss (then they
// fail with EIO: kill the processes using the mount first). The channel
// tells the file's path once the cut happened. A PowerLoss with Torn
// tears that write.
func (f *FS) CutAt(match func(path string) bool) <-chan string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutMatch, f.cutTell, f.cutAfter = match, make(chan string, 1), nil
	return f.cutTell
}

// cutIfArmed cuts the power after write c to the file at rel if CutAt
// asked for that.
func (f *FS) cutIfArmed(rel string, c *change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cutMatch == nil || f.cutAfter != nil || !f.cutMatch(rel) {
		return
	}
	f.cutAfter, f.frozen = c, make(chan struct{})
	f.cutTell <- rel
}

// stopped waits while the power is cut, and says EIO after it: nothing
// after the cut reaches the disk.
func (f *FS) stopped() syscall.Errno {
	f.mu.Lock()
	frozen, dead := f.frozen, f.dead
	f.mu.Unlock()
	if dead {
		return syscall.EIO
	}
	if frozen == nil {
		return 0
	}
	<-frozen
	return syscall.EIO
}

// Thaw answers the writes and fsyncs waiting since a cut with EIO, and
// every later one, until PowerLoss. Call it once the processes using the
// mount were sent SIGKILL: a process blocked on a request this
// filesystem has read cannot die until the request is answered.
func (f *FS) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen != nil {
		close(f.frozen)
		f.frozen, f.dead = nil, true
	}
}

// LastWrite names the file of the newest unsynced change, relative to the
// backing directory, if that change is a write ("" otherwise).
func (f *FS) LastWrite() string {
	f.mu.Lock()
	var ino uint64
	if n := len(f.log); n > 0 && f.log[n-1].kind == kWrite {
		ino = f.log[n-1].ino
	}
	f.mu.Unlock()
	if ino == 0 {
		return ""
	}
	return f.rel(ino)
}

// rel is the path of the file or directory ino relative to the backing
// directory ("?" if it is gone or only in the stash).
func (f *FS) rel(ino uint64) string {
	paths, err := f.paths()
	if err != nil {
		return "?"
	}
	p, ok := paths[ino]
	if !ok {
		return "?"
	}
	r, err := filepath.Rel(f.backing, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return "?"
	}
	return r
}

// paths maps the backing and stash directories' inodes to a path.
func (f *FS) paths() (map[uint64]string, error) {
	m := map[uint64]string{}
	for _, top := range []string{f.backing, f.stash} {
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return err
			}
			if _, ok := m[st.Ino]; !ok {
				m[st.Ino] = p
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// errDirGone: the directory of an entry change no longer exists.
var errDirGone = errors.New("the directory is gone")

// undo reverts one change on the backing directory; of a write it keeps
// the first keep bytes.
func (f *FS) undo(c *change, keep int) (err error) {
	paths, err := f.paths()
	if err != nil {
		return err
	}
	dir := func(ino uint64) (string, error) {
		p, ok := paths[ino]
		if !ok {
			return "", errDirGone
		}
		return p, nil
	}
	// A change in a directory whose removal became durable is moot: the
	// directory is gone with whatever it held.
	defer func() {
		if errors.Is(err, errDirGone) {
			err = nil
			if c.stash != "" {
				os.Remove(c.stash)
			}
		}
	}()
	switch c.kind {
	case kWrite, kTruncate:
		p, ok := paths[c.ino]
		if !ok {
			return nil // the file is gone (its creation undone): nothing to restore
		}
		fd, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer fd.Close()
		if keep > 0 {
			// The write's first keep bytes reached the disk; the rest
			// of what it replaced is back.
			old := c.old
			if keep < len(old) {
				old = old[keep:]
			} else {
				old = nil
			}
			if _, err := fd.WriteAt(old, c.off+int64(keep)); err != nil {
				return err
			}
			return fd.Truncate(max(c.oldSize, c.off+int64(keep)))
		}
		if _, err := fd.WriteAt(c.old, c.off); err != nil {
			return err
		}
		return fd.Truncate(c.oldSize)
	case kCreate, kMkdir:
		d, err := dir(c.dir)
		if err != nil {
			return err
		}
		return os.RemoveAll(filepath.Join(d, c.name))
	case kUnlink:
		d, err := dir(c.dir)
		if err != nil {
			return err
		}
		if err := os.Link(c.stash, filepath.Join(d, c.name)); err != nil {
			return err
		}
		return os.Remove(c.stash)
	case kRmdir:
		d, err := dir(c.dir)
		if err != nil {
			return err
		}
		return os.Mkdir(filepath.Join(d, c.name), fs.FileMode(c.mode&0o777))
	case kRename:
		d, err := dir(c.dir)
		if err != nil {
			return err
		}
		d2, err := dir(c.dir2)
		if err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(d2, c.name2), filepath.Join(d, c.name)); err != nil {
			return err
		}
		if c.stash != "" {
			if err := os.Link(c.stash, filepath.Join(d2, c.name2)); err != nil {
				return err
			}
			return os.Remove(c.stash)
		}
	}
	return nil
}

// record adds an unsynced change.
func (f *FS) record(c *change) {
	f.mu.Lock()
	f.log = append(f.log, c)
	f.mu.Unlock()
}

// synced makes durable what an fsync of ino makes durable; it fails when
// fsync is set to fail.
func (f *FS) synced(ino uint64) syscall.Errno {
	if errno := f.stopped(); errno != 0 {
		return errno
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fsyncs++
	if f.failFsync {
		return syscall.EIO
	}
	kept := f.log[:0]
	var drop []string
	for _, c := range f.log {
		if c.durableOnSync(ino) {
			if c.stash != "" {
				drop = append(drop, c.stash)
			}
			continue
		}
		kept = append(kept, c)
	}
	for i := len(kept); i < len(f.log); i++ {
		f.log[i] = nil
	}
	f.log = kept
	for _, p := range drop {
		os.Remove(p)
	}
	return 0
}

// stashLink hard-links p into the stash and returns the link's path.
func (f *FS) stashLink(p string) (string, error) {
	f.mu.Lock()
	f.stashSeq++
	s := filepath.Join(f.stash, fmt.Sprint(f.stashSeq))
	f.mu.Unlock()
	return s, os.Link(p, s)
}

// inoOf is the backing inode of p (0 if it cannot be read).
func inoOf(p string) uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil {
		return 0
	}
	return st.Ino
}

// before returns how to undo writing n bytes at off into the file at p:
// its size and the bytes there now.
func before(fd int, off int64, n int) (old []byte, size int64, err error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	size = st.Size
	if off < size {
		old = make([]byte, min(int64(n), size-off))
		k, err := syscall.Pread(fd, old, off)
		if err != nil {
			return nil, 0, err
		}
		old = old[:k]
	}
	return old, size, nil
}
