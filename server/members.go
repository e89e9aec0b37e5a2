package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A server learns the other servers' addresses from its configuration,
// from gossip and from the servers it asks (join, discover). Raft's own
// configuration holds only raft addresses, so a server that restarts
// knowing none of the others' gRPC addresses (the one that bootstrapped a
// cluster the others joined, say) could not reach a leader other than
// itself. It keeps what it learned in its data directory and reads it back
// at start; configured peers win over remembered ones.

const membersFile = "members.json"

// memberFile writes the members file when what it would hold changes.
type memberFile struct {
	mu   sync.Mutex
	last []byte
}

// loadMembers adds the remembered servers this server has no configured
// addresses for.
func (s *Server) loadMembers() {
	b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, membersFile))
	if err != nil {
		if !os.IsNotExist(err) {
			s.log.Warn("reading remembered members", "err", err)
		}
		return
	}
	var list []Member
	if err := json.Unmarshal(b, &list); err != nil {
		s.log.Warn("ignoring unreadable members file", "file", membersFile, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range list {
		if _, ok := s.members[m.ID]; !ok && m.ID != "" && m.ID != s.cfg.ID {
			s.members[m.ID] = m
		}
	}
}

// saveMembers writes the known servers other than this one to the members
// file (a temporary file renamed over it), if they changed.
func (s *Server) saveMembers() {
	s.mu.Lock()
	list := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		if m.ID != s.cfg.ID {
			list = append(list, m)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return
	}
	f := &s.memberFile
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes.Equal(b, f.last) {
		return
	}
	if err := writeFileAtomic(filepath.Join(s.cfg.DataDir, membersFile), b); err != nil {
		s.log.Warn("remembering members", "err", err)
		return
	}
	f.last = b
}

// writeFileAtomic replaces path with b: a reader sees the old file or the
// new one, never a part.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("server: writing %s: %w", path, err)
	}
	return nil
}
