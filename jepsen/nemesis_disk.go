package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The disk nemeses work on one server, the last voter: its data directory
// is an ext4 filesystem of its own (a sparse image on a loop device,
// mounted before the cluster starts), and the server's process can be put
// into a blkio cgroup that throttles that device.
//
//   - disk-full fills the filesystem with a ballast file; Heal deletes it
//     (and starts the server again if it exited meanwhile).
//   - disk-slow throttles the device to 10-40 write operations per second
//     for the server (cgroup v1 blkio.throttle.write_iops_device: every
//     fsync of the raft log waits for its writes); Heal lifts the limit.
//
// Device-mapper's delay target would be the classic slow disk, but this
// kernel has no device-mapper; blkio throttling on the loop device is what
// works here. Both need root, a loop device and (disk-slow) the cgroup v1
// blkio controller; without them the runner leaves the nemesis out and
// says so in the report's notes.
type nodeDisk struct {
	target  int
	img     string
	mnt     string
	loop    string
	dev     string // major:minor of the loop device
	cgroup  string // blkio cgroup directory, "" if none
	cgErr   error
	mounted bool
}

const (
	diskSize   = 256 << 20
	blkioRoot  = "/sys/fs/cgroup/blkio"
	ballastTag = "jepsen-ballast"
)

// preparer is a nemesis that needs something set up before the servers
// start and removed after they stopped.
type preparer interface {
	prepare(dir string, voters, servers int) error
	cleanup() error
}

func (d *nodeDisk) prepare(dir string, voters, _ int) (err error) {
	if d.loop != "" {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (loop device, mount)")
	}
	d.target = voters - 1
	id := fmt.Sprintf("s%d", d.target+1)
	d.mnt = filepath.Join(dir, id, "data")
	d.img = filepath.Join(dir, id+"-disk.img")
	defer func() {
		if err != nil {
			d.cleanup()
		}
	}()
	if err := os.MkdirAll(d.mnt, 0o755); err != nil {
		return err
	}
	f, err := os.Create(d.img)
	if err != nil {
		return err
	}
	err = f.Truncate(diskSize)
	f.Close()
	if err != nil {
		return err
	}
	if out, err := run("mkfs.ext4", "-q", "-F", "-m", "0", d.img); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	loop, err := run("losetup", "-f", "--show", d.img)
	if err != nil {
		return fmt.Errorf("losetup: %v: %s", err, loop)
	}
	d.loop = loop
	b, err := os.ReadFile("/sys/block/" + filepath.Base(loop) + "/dev")
	if err != nil {
		return err
	}
	d.dev = strings.TrimSpace(string(b))
	if out, err := run("mount", "-t", "ext4", loop, d.mnt); err != nil {
		return fmt.Errorf("mount %s: %v: %s", loop, err, out)
	}
	d.mounted = true
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_iops_device")); err != nil {
		d.cgErr = fmt.Errorf("no cgroup v1 blkio throttling here: %v", err)
		return nil
	}
	cg := filepath.Join(blkioRoot, fmt.Sprintf("jepsen-%d-%s", os.Getpid(), id))
	if err := os.Mkdir(cg, 0o755); err != nil {
		d.cgErr = err
		return nil
	}
	d.cgroup = cg
	return nil
}

// cleanup unmounts, detaches and removes what prepare made, and says what
// is still there afterwards. The servers must have stopped.
func (d *nodeDisk) cleanup() error {
	var errs []error
	if d.cgroup != "" {
		d.unthrottle()
		if err := os.Remove(d.cgroup); err != nil {
			errs = append(errs, fmt.Errorf("jepsen: cgroup %s left: %v", d.cgroup, err))
		} else {
			d.cgroup = ""
		}
	}
	if d.mounted {
		if out, err := run("umount", d.mnt); err != nil {
			errs = append(errs, fmt.Errorf("jepsen: umount %s: %v: %s", d.mnt, err, out))
		} else {
			d.mounted = false
		}
	}
	if d.loop != "" {
		if out, err := run("losetup", "-d", d.loop); err != nil {
			errs = append(errs, fmt.Errorf("jepsen: losetup -d %s: %v: %s", d.loop, err, out))
		}
		// The kernel may detach a busy loop device lazily.
		for k := 0; k < 100; k++ {
			if out, _ := run("losetup", "-j", d.img); out == "" {
				d.loop = ""
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d.loop != "" {
			errs = append(errs, fmt.Errorf("jepsen: loop device %s still attached to %s", d.loop, d.img))
		}
	}
	if d.img != "" && !d.mounted {
		os.Remove(d.img)
	}
	if b, err := os.ReadFile("/proc/mounts"); err == nil && d.mnt != "" && strings.Contains(string(b), " "+d.mnt+" ") {
		errs = append(errs, fmt.Errorf("jepsen: %s still mounted", d.mnt))
	}
	return errors.Join(errs...)
}

// unthrottle lifts the limit and moves every process back to the root
// blkio cgroup.
func (d *nodeDisk) unthrottle() error {
	err := os.WriteFile(filepath.Join(d.cgroup, "blkio.throttle.write_iops_device"), []byte(d.dev+" 0\n"), 0o644)
	b, _ := os.ReadFile(filepath.Join(d.cgroup, "cgroup.procs"))
	for _, pid := range strings.Fields(string(b)) {
		if e := os.WriteFile(filepath.Join(blkioRoot, "cgroup.procs"), []byte(pid+"\n"), 0o644); e != nil && err == nil {
			err = e
		}
	}
	return err
}

type diskFullNemesis struct {
	d      *nodeDisk
	note   string
	logOff int64 // the target's log size at Inject
}

func (n *diskFullNemesis) Name() string { return "disk-full" }
func (n *diskFullNemesis) prepare(dir string, voters, servers int) error {
	return n.d.prepare(dir, voters, servers)
}
func (n *diskFullNemesis) cleanup() error   { return n.d.cleanup() }
func (n *diskFullNemesis) HealNote() string { return n.note }

func (n *diskFullNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note = ""
	d := n.d
	if st, err := os.Stat(c.LogPath(d.target)); err == nil {
		n.logOff = st.Size()
	}
	ballast := filepath.Join(d.mnt, ballastTag)
	f, err := os.OpenFile(ballast, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return "fill the disk", err
	}
	var st syscall.Statfs_t
	syscall.Statfs(d.mnt, &st)
	size := int64(st.Bavail) * st.Bsize
	syscall.Fallocate(int(f.Fd()), 0, 0, size)
	// Whatever fallocate left: write until the filesystem says no.
	buf := make([]byte, 64<<10)
	f.Seek(0, 2)
	for k := 0; k < 1<<14; k++ {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	syscall.Statfs(d.mnt, &st)
	desc := fmt.Sprintf("fill %s's data filesystem (%s) with %d MiB of ballast, %d bytes left", c.ID(d.target), d.loop, size>>20, int64(st.Bavail)*st.Bsize)
	probe := filepath.Join(d.mnt, "jepsen-probe")
	perr := os.WriteFile(probe, make([]byte, 64<<10), 0o600)
	os.Remove(probe)
	if perr == nil {
		return desc, errors.New("a 64 KiB write still succeeds")
	}
	return desc + "; probe write: " + perr.Error(), nil
}

func (n *diskFullNemesis) Heal(ctx context.Context, c *Cluster) error {
	d := n.d
	err := os.Remove(filepath.Join(d.mnt, ballastTag))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if !c.Running(d.target) {
		n.note = fmt.Sprintf("%s exited while its disk was full: %s; started again", c.ID(d.target), lastLine(LogTail(c.LogPath(d.target), 2000)))
		if e := c.Start(d.target); e != nil {
			err = errors.Join(err, e)
		}
	} else {
		n.note = c.ID(d.target) + " kept running with a full disk"
	}
	if b, e := os.ReadFile(c.LogPath(d.target)); e == nil && int64(len(b)) >= n.logOff {
		n.note += fmt.Sprintf("; its log says \"no space left on device\" %d times", strings.Count(string(b[n.logOff:]), "no space left on device"))
	}
	return err
}

type diskSlowNemesis struct {
	d    *nodeDisk
	note string
}

func (n *diskSlowNemesis) Name() string { return "disk-slow" }
func (n *diskSlowNemesis) prepare(dir string, voters, servers int) error {
	if _, err := os.Stat(filepath.Join(blkioRoot, "blkio.throttle.write_iops_device")); err != nil {
		return fmt.Errorf("no cgroup v1 blkio throttling here: %v", err)
	}
	return n.d.prepare(dir, voters, servers)
}
func (n *diskSlowNemesis) cleanup() error   { return n.d.cleanup() }
func (n *diskSlowNemesis) HealNote() string { return n.note }

func (n *diskSlowNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note = ""
	d := n.d
	if d.cgroup == "" {
		return "slow disk", fmt.Errorf("no blkio cgroup: %v", d.cgErr)
	}
	iops := 10 + r.Intn(31)
	desc := fmt.Sprintf("throttle %s's data device %s (%s) to %d writes/s", c.ID(d.target), d.loop, d.dev, iops)
	pid := c.Pid(d.target)
	if pid == 0 {
		return desc, fmt.Errorf("%s is not running", c.ID(d.target))
	}
	if err := os.WriteFile(filepath.Join(d.cgroup, "blkio.throttle.write_iops_device"), []byte(fmt.Sprintf("%s %d\n", d.dev, iops)), 0o644); err != nil {
		return desc, err
	}
	if err := os.WriteFile(filepath.Join(d.cgroup, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
		return desc, err
	}
	return desc + "; probe: " + d.probe(true), nil
}

// probe times 10 synchronous 4 KiB writes on the node's filesystem, from
// inside the throttled cgroup or outside it.
func (d *nodeDisk) probe(inCgroup bool) string {
	script := "exec dd if=/dev/zero of=" + filepath.Join(d.mnt, "jepsen-probe") + " bs=4k count=10 oflag=dsync"
	if inCgroup {
		script = "echo $$ > " + filepath.Join(d.cgroup, "cgroup.procs") + "; " + script
	}
	t0 := time.Now()
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	took := time.Since(t0).Round(time.Millisecond)
	os.Remove(filepath.Join(d.mnt, "jepsen-probe"))
	if err != nil {
		return fmt.Sprintf("dd: %v: %s", err, out)
	}
	return fmt.Sprintf("10 dsync writes of 4 KiB took %v", took)
}

func (n *diskSlowNemesis) Heal(ctx context.Context, c *Cluster) error {
	d := n.d
	if d.cgroup == "" {
		return nil
	}
	served, _ := os.ReadFile(filepath.Join(d.cgroup, "blkio.throttle.io_serviced"))
	err := d.unthrottle()
	n.note = "throttled writes served: " + strings.Join(strings.Fields(grepLine(string(served), d.dev+" Write")), " ") + "; after heal " + d.probe(false)
	return err
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
