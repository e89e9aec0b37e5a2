//go:build peerplanted

package replica

// A planted regression, for the attack suite (internal/attack) to prove it
// fails when a peer check is removed: a binary built with -tags
// peerplanted accepts any certificate on the peer plane under a cluster
// key, so a stranger's connection is taken as a member's.
func init() { plantedNoPeerCheck = true }
