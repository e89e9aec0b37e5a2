package zk

import "coord/vocab"

// The watch management requests. A watch is set by exists/getData/
// getChildren with Watch true, by addWatch, or re-registered by SetWatches
// after a reconnect; only addWatch has a response body.

// SetWatches re-registers a client's one-shot watches after it reconnects
// (op setWatches, xid XidSetWatches). The server fires at once the watches
// whose node changed after RelativeZxid, the client's last zxid. The Java
// client splits its watches over several SetWatches of at most 128 KiB.
// It has no response body.
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

func (r *SetWatches) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
}

func (r *SetWatches) Decode(d *Decoder) error {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
	return d.Err()
}

// SetWatches2 is SetWatches with the persistent watches (op setWatches2,
// sent by 3.6+ clients).
type SetWatches2 struct {
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

func (r *SetWatches2) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
	e.Strings(r.PersistentWatches)
	e.Strings(r.PersistentRecursiveWatches)
}

func (r *SetWatches2) Decode(d *Decoder) error {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
	r.PersistentWatches = d.Strings()
	r.PersistentRecursiveWatches = d.Strings()
	return d.Err()
}

// AddWatchRequest adds a persistent or persistent-recursive watch (op
// addWatch). ZooKeeper answers it with an ErrorResponse{OK} body.
type AddWatchRequest struct {
	Path string
	Mode vocab.AddWatchMode
}

func (r *AddWatchRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Int32(int32(r.Mode))
}

func (r *AddWatchRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Mode = vocab.AddWatchMode(d.Int32())
	return d.Err()
}

// CheckWatchesRequest asks whether the session has a watch of Type on Path
// (op checkWatches); the answer is OK or NoWatcher, without a body.
type CheckWatchesRequest struct {
	Path string
	Type vocab.WatcherType
}

func (r *CheckWatchesRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Int32(int32(r.Type))
}

func (r *CheckWatchesRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Type = vocab.WatcherType(d.Int32())
	return d.Err()
}

// RemoveWatchesRequest removes the session's watches of Type on Path (op
// removeWatches); the answer is OK or NoWatcher, without a body.
type RemoveWatchesRequest struct {
	Path string
	Type vocab.WatcherType
}

func (r *RemoveWatchesRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Int32(int32(r.Type))
}

func (r *RemoveWatchesRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Type = vocab.WatcherType(d.Int32())
	return d.Err()
}
