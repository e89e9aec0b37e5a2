// Planted: the leaf imports upward.
package zxid

import "coord/fsm"

type Zxid int64

var _ = fsm.FSM{}
