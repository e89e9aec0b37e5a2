package zk

import "coord/vocab"

// The request and response bodies of the znode operations.

// CreateRequest is the body of create, create2 and createContainer.
type CreateRequest struct {
	Path  string
	Data  []byte // nil is null data, kept apart from empty data
	ACL   []vocab.ACL
	Flags vocab.CreateMode
}

func (r *CreateRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Buffer(r.Data)
	e.ACLs(r.ACL)
	e.Int32(int32(r.Flags))
}

func (r *CreateRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.ACL = d.ACLs()
	r.Flags = vocab.CreateMode(d.Int32())
	return d.Err()
}

// CreateTTLRequest is the body of createTTL.
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []vocab.ACL
	Flags vocab.CreateMode
	TTL   int64 // ms
}

func (r *CreateTTLRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Buffer(r.Data)
	e.ACLs(r.ACL)
	e.Int32(int32(r.Flags))
	e.Int64(r.TTL)
}

func (r *CreateTTLRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.ACL = d.ACLs()
	r.Flags = vocab.CreateMode(d.Int32())
	r.TTL = d.Int64()
	return d.Err()
}

// CreateResponse answers create.
type CreateResponse struct{ Path string }

func (r *CreateResponse) Encode(e *Encoder)       { e.UString(r.Path) }
func (r *CreateResponse) Decode(d *Decoder) error { r.Path = d.UString(); return d.Err() }

// Create2Response answers create2, createTTL and createContainer.
type Create2Response struct {
	Path string
	Stat vocab.Stat
}

func (r *Create2Response) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Stat(&r.Stat)
}

func (r *Create2Response) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Stat = d.Stat()
	return d.Err()
}

// DeleteRequest is the body of delete.
type DeleteRequest struct {
	Path    string
	Version int32 // -1 for any
}

func (r *DeleteRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Int32(r.Version)
}

func (r *DeleteRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Version = d.Int32()
	return d.Err()
}

// DeleteContainerRequest is the body of deleteContainer, which ZooKeeper
// accepts from clients although only its own container manager uses it: the
// whole body is the path's bytes, with no length prefix.
type DeleteContainerRequest struct{ Path string }

func (r *DeleteContainerRequest) Encode(e *Encoder) { e.b = append(e.b, r.Path...) }

func (r *DeleteContainerRequest) Decode(d *Decoder) error {
	r.Path = string(d.take(d.Remaining()))
	return d.Err()
}

// ExistsRequest is the body of exists.
type ExistsRequest struct {
	Path  string
	Watch bool
}

func (r *ExistsRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Bool(r.Watch)
}

func (r *ExistsRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Watch = d.Bool()
	return d.Err()
}

// ExistsResponse answers exists.
type ExistsResponse struct{ Stat vocab.Stat }

func (r *ExistsResponse) Encode(e *Encoder)       { e.Stat(&r.Stat) }
func (r *ExistsResponse) Decode(d *Decoder) error { r.Stat = d.Stat(); return d.Err() }

// SetDataResponse answers setData (and, in ZooKeeper, a check).
type SetDataResponse struct{ Stat vocab.Stat }

func (r *SetDataResponse) Encode(e *Encoder)       { e.Stat(&r.Stat) }
func (r *SetDataResponse) Decode(d *Decoder) error { r.Stat = d.Stat(); return d.Err() }

// SetACLResponse answers setACL.
type SetACLResponse struct{ Stat vocab.Stat }

func (r *SetACLResponse) Encode(e *Encoder)       { e.Stat(&r.Stat) }
func (r *SetACLResponse) Decode(d *Decoder) error { r.Stat = d.Stat(); return d.Err() }

// GetDataRequest is the body of getData.
type GetDataRequest struct {
	Path  string
	Watch bool
}

func (r *GetDataRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Bool(r.Watch)
}

func (r *GetDataRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Watch = d.Bool()
	return d.Err()
}

// GetDataResponse answers getData.
type GetDataResponse struct {
	Data []byte // nil is sent as null, which clients return as null data
	Stat vocab.Stat
}

func (r *GetDataResponse) Encode(e *Encoder) {
	e.Buffer(r.Data)
	e.Stat(&r.Stat)
}

func (r *GetDataResponse) Decode(d *Decoder) error {
	r.Data = d.Buffer()
	r.Stat = d.Stat()
	return d.Err()
}

// SetDataRequest is the body of setData.
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

func (r *SetDataRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Buffer(r.Data)
	e.Int32(r.Version)
}

func (r *SetDataRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Data = d.Buffer()
	r.Version = d.Int32()
	return d.Err()
}

// GetACLRequest is the body of getACL.
type GetACLRequest struct{ Path string }

func (r *GetACLRequest) Encode(e *Encoder)       { e.UString(r.Path) }
func (r *GetACLRequest) Decode(d *Decoder) error { r.Path = d.UString(); return d.Err() }

// SyncRequest is the body of sync.
type SyncRequest struct{ Path string }

func (r *SyncRequest) Encode(e *Encoder)       { e.UString(r.Path) }
func (r *SyncRequest) Decode(d *Decoder) error { r.Path = d.UString(); return d.Err() }

// SyncResponse answers sync by echoing the path.
type SyncResponse struct{ Path string }

func (r *SyncResponse) Encode(e *Encoder)       { e.UString(r.Path) }
func (r *SyncResponse) Decode(d *Decoder) error { r.Path = d.UString(); return d.Err() }

// GetAllChildrenNumberRequest is the body of getAllChildrenNumber.
type GetAllChildrenNumberRequest struct{ Path string }

func (r *GetAllChildrenNumberRequest) Encode(e *Encoder) { e.UString(r.Path) }

func (r *GetAllChildrenNumberRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	return d.Err()
}

// GetEphemeralsRequest is the body of getEphemerals. A PrefixPath that is
// empty or "/" (after trimming blanks) asks for all of the session's
// ephemerals; otherwise those whose path starts with it (a string prefix).
type GetEphemeralsRequest struct{ PrefixPath string }

func (r *GetEphemeralsRequest) Encode(e *Encoder)       { e.UString(r.PrefixPath) }
func (r *GetEphemeralsRequest) Decode(d *Decoder) error { r.PrefixPath = d.UString(); return d.Err() }

// GetACLResponse answers getACL.
type GetACLResponse struct {
	ACL  []vocab.ACL
	Stat vocab.Stat
}

func (r *GetACLResponse) Encode(e *Encoder) {
	e.ACLs(r.ACL)
	e.Stat(&r.Stat)
}

func (r *GetACLResponse) Decode(d *Decoder) error {
	r.ACL = d.ACLs()
	r.Stat = d.Stat()
	return d.Err()
}

// SetACLRequest is the body of setACL.
type SetACLRequest struct {
	Path    string
	ACL     []vocab.ACL
	Version int32
}

func (r *SetACLRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.ACLs(r.ACL)
	e.Int32(r.Version)
}

func (r *SetACLRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.ACL = d.ACLs()
	r.Version = d.Int32()
	return d.Err()
}

// GetChildrenRequest is the body of getChildren.
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

func (r *GetChildrenRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Bool(r.Watch)
}

func (r *GetChildrenRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Watch = d.Bool()
	return d.Err()
}

// GetChildren2Request is the body of getChildren2.
type GetChildren2Request struct {
	Path  string
	Watch bool
}

func (r *GetChildren2Request) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Bool(r.Watch)
}

func (r *GetChildren2Request) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Watch = d.Bool()
	return d.Err()
}

// GetChildrenResponse answers getChildren.
type GetChildrenResponse struct{ Children []string }

func (r *GetChildrenResponse) Encode(e *Encoder)       { e.Strings(r.Children) }
func (r *GetChildrenResponse) Decode(d *Decoder) error { r.Children = d.Strings(); return d.Err() }

// GetChildren2Response answers getChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     vocab.Stat
}

func (r *GetChildren2Response) Encode(e *Encoder) {
	e.Strings(r.Children)
	e.Stat(&r.Stat)
}

func (r *GetChildren2Response) Decode(d *Decoder) error {
	r.Children = d.Strings()
	r.Stat = d.Stat()
	return d.Err()
}

// CheckVersionRequest is the body of check (inside multi).
type CheckVersionRequest struct {
	Path    string
	Version int32
}

func (r *CheckVersionRequest) Encode(e *Encoder) {
	e.UString(r.Path)
	e.Int32(r.Version)
}

func (r *CheckVersionRequest) Decode(d *Decoder) error {
	r.Path = d.UString()
	r.Version = d.Int32()
	return d.Err()
}

// GetAllChildrenNumberResponse answers getAllChildrenNumber: the number of
// descendants of the path, not counting the path itself.
type GetAllChildrenNumberResponse struct{ TotalNumber int32 }

func (r *GetAllChildrenNumberResponse) Encode(e *Encoder) { e.Int32(r.TotalNumber) }

func (r *GetAllChildrenNumberResponse) Decode(d *Decoder) error {
	r.TotalNumber = d.Int32()
	return d.Err()
}

// GetEphemeralsResponse answers getEphemerals.
type GetEphemeralsResponse struct{ Ephemerals []string }

func (r *GetEphemeralsResponse) Encode(e *Encoder)       { e.Strings(r.Ephemerals) }
func (r *GetEphemeralsResponse) Decode(d *Decoder) error { r.Ephemerals = d.Strings(); return d.Err() }

// ReconfigRequest is the body of reconfig. coord changes membership through
// its own admin API; the record is here so the server can decode and refuse
// it (ZooKeeper answers ReconfigDisabled when reconfig is off).
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

func (r *ReconfigRequest) Encode(e *Encoder) {
	e.UString(r.JoiningServers)
	e.UString(r.LeavingServers)
	e.UString(r.NewMembers)
	e.Int64(r.CurConfigID)
}

func (r *ReconfigRequest) Decode(d *Decoder) error {
	r.JoiningServers = d.UString()
	r.LeavingServers = d.UString()
	r.NewMembers = d.UString()
	r.CurConfigID = d.Int64()
	return d.Err()
}
