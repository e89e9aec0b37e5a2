// Not planted: what fsm may do.
package fsm

import (
	"sync"

	"coord/zxid"
)

type FSM struct {
	mu   sync.Mutex
	last zxid.Zxid
}
