package forgetfs

import (
	"context"
	"path/filepath"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is go-fuse's loopback node that records, before it changes the
// backing directory, how to undo the change.
type node struct {
	gofs.LoopbackNode
	fs *FS
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

func (n *node) ino() uint64 { return inoOf(n.backingPath()) }

var (
	_ gofs.NodeCreater   = (*node)(nil)
	_ gofs.NodeMkdirer   = (*node)(nil)
	_ gofs.NodeMknoder   = (*node)(nil)
	_ gofs.NodeSymlinker = (*node)(nil)
	_ gofs.NodeLinker    = (*node)(nil)
	_ gofs.NodeUnlinker  = (*node)(nil)
	_ gofs.NodeRmdirer   = (*node)(nil)
	_ gofs.NodeRenamer   = (*node)(nil)
	_ gofs.NodeOpener    = (*node)(nil)
	_ gofs.NodeSetattrer = (*node)(nil)
	_ gofs.NodeFsyncer   = (*node)(nil)
)

// created records a new entry name in this directory if it did not exist
// before the operation (existed is what a lookup found first).
func (n *node) created(name string, k kind, existed bool) {
	if !existed {
		n.fs.record(&change{kind: k, dir: n.ino(), name: name})
	}
}

func (n *node) exists(name string) bool {
	var st syscall.Stat_t
	return syscall.Lstat(filepath.Join(n.backingPath(), name), &st) == nil
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	existed := n.exists(name)
	if existed && flags&syscall.O_TRUNC != 0 {
		if errno := n.fs.truncating(filepath.Join(n.backingPath(), name), 0); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	n.created(name, kCreate, existed)
	return in, n.fs.wrap(fh, filepath.Join(n.backingPath(), name)), ff, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.created(name, kMkdir, false)
	}
	return in, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.created(name, kCreate, false)
	}
	return in, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno == 0 {
		n.created(name, kCreate, false)
	}
	return in, errno
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 {
		n.created(name, kCreate, false)
	}
	return in, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p := filepath.Join(n.backingPath(), name)
	s, err := n.fs.stashLink(p)
	if err != nil {
		return gofs.ToErrno(err)
	}
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		syscall.Unlink(s)
		return errno
	}
	n.fs.record(&change{kind: kUnlink, dir: n.ino(), name: name, stash: s})
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(n.backingPath(), name), &st)
	if errno := n.LoopbackNode.Rmdir(ctx, name); errno != 0 {
		return errno
	}
	n.fs.record(&change{kind: kRmdir, dir: n.ino(), name: name, mode: st.Mode})
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || flags != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE and RENAME_NOREPLACE are not undone
	}
	target := filepath.Join(np.backingPath(), newName)
	var s string
	var st syscall.Stat_t
	if syscall.Lstat(target, &st) == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		var err error
		if s, err = n.fs.stashLink(target); err != nil {
			return gofs.ToErrno(err)
		}
	}
	if errno := n.LoopbackNode.Rename(ctx, name, &np.LoopbackNode, newName, flags); errno != 0 {
		if s != "" {
			syscall.Unlink(s)
		}
		return errno
	}
	n.fs.record(&change{kind: kRename, dir: n.ino(), name: name, dir2: np.ino(), name2: newName, stash: s})
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	p := n.backingPath()
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if errno := n.fs.truncating(p, 0); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.fs.wrap(fh, p), ff, 0
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if errno := n.fs.truncating(n.backingPath(), int64(sz)); errno != 0 {
			return errno
		}
	}
	if f, ok := fh.(*file); ok {
		fh = f.lf
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// Fsync makes the node's unsynced changes durable: a file's data, or a
// directory's entries.
func (n *node) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) syscall.Errno {
	if errno := n.fs.synced(n.ino()); errno != 0 {
		return errno
	}
	if f, ok := fh.(*file); ok {
		return f.lf.Fsync(ctx, flags)
	}
	fd, err := syscall.Open(n.backingPath(), syscall.O_RDONLY, 0)
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(fd)
	return gofs.ToErrno(syscall.Fsync(fd))
}

// truncating records how to undo setting the file at p to size.
func (f *FS) truncating(p string, size int64) syscall.Errno {
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	c := &change{kind: kTruncate, ino: st.Ino, off: size, oldSize: st.Size}
	if size < st.Size {
		old, _, err := before(fd, size, int(st.Size-size))
		if err != nil {
			return gofs.ToErrno(err)
		}
		c.old = old
	}
	f.record(c)
	return 0
}

// file is an open file that records how to undo each write.
type file struct {
	lf  *gofs.LoopbackFile
	fs  *FS
	ino uint64
	rel string // its path when opened, relative to the backing directory
	fd  int    // a read-only descriptor of the backing file, to read what a write replaces
}

func (f *FS) wrap(fh gofs.FileHandle, p string) gofs.FileHandle {
	lf, ok := fh.(*gofs.LoopbackFile)
	if !ok {
		return fh
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		fd = -1
	}
	rel, err := filepath.Rel(f.backing, p)
	if err != nil {
		rel = p
	}
	return &file{lf: lf, fs: f, ino: inoOf(p), rel: rel, fd: fd}
}

var (
	_ gofs.FileReader    = (*file)(nil)
	_ gofs.FileWriter    = (*file)(nil)
	_ gofs.FileReleaser  = (*file)(nil)
	_ gofs.FileFlusher   = (*file)(nil)
	_ gofs.FileFsyncer   = (*file)(nil)
	_ gofs.FileGetattrer = (*file)(nil)
	_ gofs.FileSetattrer = (*file)(nil)
	_ gofs.FileLseeker   = (*file)(nil)
	_ gofs.FileAllocater = (*file)(nil)
)

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if f.fd < 0 {
		return 0, syscall.EIO
	}
	if errno := f.fs.stopped(); errno != 0 {
		return 0, errno
	}
	old, size, err := before(f.fd, off, len(data))
	if err != nil {
		return 0, gofs.ToErrno(err)
	}
	n, errno := f.lf.Write(ctx, data, off)
	if n > 0 {
		c := &change{kind: kWrite, ino: f.ino, off: off, old: old, oldSize: size, newLen: int(n)}
		f.fs.record(c)
		f.fs.cutIfArmed(f.rel, c)
	}
	return n, errno
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	if f.fd >= 0 {
		syscall.Close(f.fd)
		f.fd = -1
	}
	return f.lf.Release(ctx)
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.lf.Flush(ctx) }

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if errno := f.fs.synced(f.ino); errno != 0 {
		return errno
	}
	return f.lf.Fsync(ctx, flags)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off uint64, sz uint64, mode uint32) syscall.Errno {
	if f.fd >= 0 {
		var st syscall.Stat_t
		if syscall.Fstat(f.fd, &st) == nil && int64(off+sz) > st.Size {
			f.fs.record(&change{kind: kTruncate, ino: f.ino, off: st.Size, oldSize: st.Size})
		}
	}
	return f.lf.Allocate(ctx, off, sz, mode)
}

// dirStream is what go-fuse asks of a directory's handle besides fsync.
type dirStream interface {
	gofs.FileReaddirenter
	gofs.FileSeekdirer
	gofs.FileReleasedirer
}

// dirHandle is an open directory whose fsync makes its entries durable.
type dirHandle struct {
	dirStream
	n *node
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	ds, ok := fh.(dirStream)
	if !ok {
		return fh, ff, 0
	}
	return &dirHandle{dirStream: ds, n: n}, ff, 0
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if errno := d.n.fs.synced(d.n.ino()); errno != 0 {
		return errno
	}
	if s, ok := d.dirStream.(gofs.FileFsyncdirer); ok {
		return s.Fsyncdir(ctx, flags)
	}
	return 0
}
