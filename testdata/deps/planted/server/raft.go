// Planted: only server/replica may import hashicorp/raft.
package server

import "github.com/hashicorp/raft"

var _ raft.ServerID
