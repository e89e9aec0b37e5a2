package vocab

import "strconv"

// EventNone is the event type of a session state change rather than a
// change to a znode (ZooKeeper's Watcher.Event.EventType.None).
const EventNone EventType = -1

// WatcherType selects watches in removeWatches and checkWatches, with
// ZooKeeper's numbers (Watcher.WatcherType; 4 and 5 since 3.9).
type WatcherType int32

const (
	WatcherChildren            WatcherType = 1 // one-shot child watches
	WatcherData                WatcherType = 2 // one-shot data watches (getData, exists)
	WatcherAny                 WatcherType = 3 // every kind
	WatcherPersistent          WatcherType = 4 // persistent watches
	WatcherPersistentRecursive WatcherType = 5 // persistent-recursive watches
)

// Valid reports whether t is one of ZooKeeper's watcher types.
func (t WatcherType) Valid() bool { return t >= WatcherChildren && t <= WatcherPersistentRecursive }

func (t WatcherType) String() string {
	switch t {
	case WatcherChildren:
		return "Children"
	case WatcherData:
		return "Data"
	case WatcherAny:
		return "Any"
	case WatcherPersistent:
		return "Persistent"
	case WatcherPersistentRecursive:
		return "PersistentRecursive"
	}
	return "WatcherType(" + strconv.Itoa(int(t)) + ")"
}

// AddWatchMode is the mode of an addWatch request (ZooDefs.AddWatchModes).
type AddWatchMode int32

const (
	AddWatchPersistent          AddWatchMode = 0
	AddWatchPersistentRecursive AddWatchMode = 1
)
