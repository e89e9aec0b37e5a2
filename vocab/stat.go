package vocab

// Stat is ZooKeeper's znode Stat, field for field and in wire order.
type Stat struct {
	Czxid          int64 // zxid of the create
	Mzxid          int64 // zxid of the last setData (or the create)
	Ctime          int64 // ms since the epoch, from the creating command
	Mtime          int64 // ms since the epoch, from the last modifying command
	Version        int32 // number of setData
	Cversion       int32 // child creates and deletes, as ZooKeeper reports it
	Aversion       int32 // number of setACL
	EphemeralOwner int64 // owning session of an ephemeral; 0 for every other kind
	DataLength     int32
	NumChildren    int32
	Pzxid          int64 // zxid of the last child create/delete
}
