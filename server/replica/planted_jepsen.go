//go:build jepsenplanted

package replica

import (
	"os"

	"coord/fsm"
)

// Planted bugs, for jepsen/ to prove its checkers can fail. Only a binary
// built with -tags jepsenplanted has them, and only with COORD_PLANTED
// naming one (server/sessions/planted_jepsen.go has the session layer's):
//
//	followerread: a follower or observer answers a forwarded data write
//	(create, delete, setData, setACL, multi) once the leader reports it
//	committed, before applying it itself, so the session's next read there
//	may miss its own write.
//
//	reuseorigin: every boot of a server proposes under the same origin
//	(its id and a constant nonce), so after a crash-restart the entries of
//	its previous boots that it replays complete the new boot's requests
//	with the same sequence numbers: new clients are handed old results
//	(the bug per-boot origins fixed; invariant 8).
func init() {
	switch os.Getenv("COORD_PLANTED") {
	case "followerread":
		plantedFollowerRead = func(typ fsm.CmdType) bool {
			switch typ {
			case fsm.CmdCreate, fsm.CmdDelete, fsm.CmdSetData, fsm.CmdSetACL, fsm.CmdMulti:
				return true
			}
			return false
		}
	case "reuseorigin":
		plantedReuseOrigin = func() string { return "0000000000000000" }
	}
}
