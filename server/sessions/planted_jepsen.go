//go:build jepsenplanted

package sessions

import (
	"os"

	"coord/fsm"
)

// Planted bugs, for jepsen/ to prove its checkers can fail. Only a binary
// built with -tags jepsenplanted has them, and only with COORD_PLANTED
// naming one (server/replica/planted_jepsen.go has the replica's):
//
//	ackearly: a versioned setData (a compare-and-set) is acknowledged as a
//	success when it is submitted, before it commits and whatever its result.
//
//	keepephemerals: the leader forgets a session whose deadline passed
//	instead of committing the closeSession that deletes its ephemerals, so
//	an expired session's ephemerals stay forever.
func init() {
	switch os.Getenv("COORD_PLANTED") {
	case "ackearly":
		plantedAckEarly = func(cmd *fsm.Command) bool {
			return cmd.Type == fsm.CmdSetData && cmd.Op.Version != -1
		}
	case "keepephemerals":
		plantedKeepEphemerals = func() bool { return true }
	}
}
