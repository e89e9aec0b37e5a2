package vocab

import "strconv"

// EventType is a znode watch event's type, with ZooKeeper's numeric values
// (Watcher.Event.EventType). These four are what a change to the tree fires;
// the wire codec (zk.EventType) and the Go client add the session and
// watch-removal kinds on top.
type EventType int32

const (
	EventNodeCreated         EventType = 1
	EventNodeDeleted         EventType = 2
	EventNodeDataChanged     EventType = 3
	EventNodeChildrenChanged EventType = 4
)

func (t EventType) String() string {
	switch t {
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	case EventNone:
		return "None"
	}
	return "EventType(?)"
}

// KeeperState is a session's state as ZooKeeper numbers it: the state field
// of a WatcherEvent (Watcher.Event.KeeperState).
type KeeperState int32

// ZooKeeper's KeeperState values.
const (
	StateUnknown           KeeperState = -1 // deprecated
	StateDisconnected      KeeperState = 0
	StateNoSyncConnected   KeeperState = 1 // deprecated
	StateSyncConnected     KeeperState = 3
	StateAuthFailed        KeeperState = 4
	StateConnectedReadOnly KeeperState = 5
	StateSASLAuthenticated KeeperState = 6
	StateExpired           KeeperState = -112
	StateClosed            KeeperState = 7
)

func (s KeeperState) String() string {
	switch s {
	case StateUnknown:
		return "Unknown"
	case StateDisconnected:
		return "Disconnected"
	case StateNoSyncConnected:
		return "NoSyncConnected"
	case StateSyncConnected:
		return "SyncConnected"
	case StateAuthFailed:
		return "AuthFailed"
	case StateConnectedReadOnly:
		return "ConnectedReadOnly"
	case StateSASLAuthenticated:
		return "SaslAuthenticated"
	case StateExpired:
		return "Expired"
	case StateClosed:
		return "Closed"
	}
	return "KeeperState(" + strconv.Itoa(int(s)) + ")"
}
