package client

import (
	"coord/api"
	"coord/fsm"
	"coord/server"
	"coord/session"
)

type Conn struct{}

var _ = api.X

// A known deviation (logged, not failed).
var _ = fsm.FSM{}

// Planted: client may import neither server nor session.
var _, _ = server.Run, session.SystemClock{}
