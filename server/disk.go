package server

import (
	"syscall"
	"time"
)

// diskLoop watches the free space of the data directory. Below
// Config.MinFreeDisk (and never below the wal's next segment) the server refuses new writes with an error instead of
// letting raft hit a full disk, where it could only crash; writes already
// acknowledged are on disk and stay there. Writing resumes once space is
// freed.
func (s *Server) diskLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.DiskCheckInterval)
	defer tick.Stop()
	for {
		s.checkDisk()
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
	}
}

func (s *Server) checkDisk() {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.cfg.DataDir, &st); err != nil {
		s.log.Warn("checking free disk space", "dir", s.cfg.DataDir, "err", err)
		return
	}
	free := st.Bavail * uint64(st.Bsize)
	// A wal log store preallocates its next segment whole: below that much
	// free space its next rotation would fail, whatever MinFreeDisk says.
	need := max(s.minFreeDisk.Load(), s.rep.StoreHeadroom())
	low := free < need
	if was := s.rep.SetDiskLow(low); was != low {
		if low {
			s.log.Error("disk nearly full: refusing writes", "dir", s.cfg.DataDir, "free_bytes", free, "min_free_bytes", need)
		} else {
			s.log.Info("disk space available again: accepting writes", "free_bytes", free)
		}
	}
}
