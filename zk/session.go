package zk

import "coord/vocab"

// The records of a connection's life: the handshake, the headers framing
// every request and reply, watch events, authentication and closing.

// ConnectRequest is the first frame a client sends. Clients before 3.4 and
// go-zookeeper omit the trailing readOnly byte; Java, C and kazoo send it.
// Decode accepts both and records which in HasReadOnly, because the
// ConnectResponse must carry the readOnly byte exactly when the request did.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32 // requested session timeout, ms
	SessionID       int64 // 0 for a new session
	Passwd          []byte
	ReadOnly        bool // the client accepts a read-only server
	HasReadOnly     bool // the readOnly byte was (or is to be) on the wire
}

func (r *ConnectRequest) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int64(r.LastZxidSeen)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

func (r *ConnectRequest) Decode(d *Decoder) error {
	r.ProtocolVersion = d.Int32()
	r.LastZxidSeen = d.Int64()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.HasReadOnly = d.Remaining() > 0
	r.ReadOnly = r.HasReadOnly && d.Bool()
	return d.Err()
}

// Response builds the ConnectResponse for r: protocol version 0 and the
// readOnly byte present exactly when r had it.
func (r *ConnectRequest) Response(timeOut int32, sessionID int64, passwd []byte, readOnly bool) ConnectResponse {
	return ConnectResponse{TimeOut: timeOut, SessionID: sessionID, Passwd: passwd,
		ReadOnly: readOnly, HasReadOnly: r.HasReadOnly}
}

// Refusal builds what ZooKeeper answers a client whose session is expired,
// unknown or has the wrong password: timeout 0, session 0 and 16 zero bytes
// of password; the server then closes the connection.
func (r *ConnectRequest) Refusal() ConnectResponse {
	return r.Response(0, 0, make([]byte, PasswordLen), false)
}

// ConnectResponse answers a ConnectRequest. ZooKeeper sends it without a
// ReplyHeader, as the whole body of the first frame.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // negotiated, ms; 0 refuses the session
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool // the server is read-only
	HasReadOnly     bool // encode the readOnly byte (set when the request had one)
}

func (r *ConnectResponse) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

func (r *ConnectResponse) Decode(d *Decoder) error {
	r.ProtocolVersion = d.Int32()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.HasReadOnly = d.Remaining() > 0
	r.ReadOnly = r.HasReadOnly && d.Bool()
	return d.Err()
}

// RequestHeader starts every request frame after the handshake.
type RequestHeader struct {
	Xid  int32
	Type OpCode
}

func (r *RequestHeader) Encode(e *Encoder) {
	e.Int32(r.Xid)
	e.Int32(int32(r.Type))
}

func (r *RequestHeader) Decode(d *Decoder) error {
	r.Xid = d.Int32()
	r.Type = OpCode(d.Int32())
	return d.Err()
}

// ReplyHeader starts every reply and event frame. Zxid is the server's last
// applied zxid when it answers (for reads too), 0 in an auth reply, and in a
// notification -1 (ZooKeeper 3.8) or the event's zxid (3.9); clients only
// learn lastZxid from replies to their requests. Err is a ZooKeeper error
// code; when it is not OK clients ignore any body, so none need be sent.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  vocab.Code
}

func (r *ReplyHeader) Encode(e *Encoder) {
	e.Int32(r.Xid)
	e.Int64(r.Zxid)
	e.Int32(int32(r.Err))
}

func (r *ReplyHeader) Decode(d *Decoder) error {
	r.Xid = d.Int32()
	r.Zxid = d.Int64()
	r.Err = vocab.Code(d.Int32())
	return d.Err()
}

// WatcherEvent is the body of a notification (xid XidNotification).
type WatcherEvent struct {
	Type  EventType
	State KeeperState
	Path  string
}

func (r *WatcherEvent) Encode(e *Encoder) {
	e.Int32(int32(r.Type))
	e.Int32(int32(r.State))
	e.UString(r.Path)
}

func (r *WatcherEvent) Decode(d *Decoder) error {
	r.Type = EventType(d.Int32())
	r.State = KeeperState(d.Int32())
	r.Path = d.UString()
	return d.Err()
}

// AuthPacket is an addAuth request (xid XidAuth). Type is always 0.
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte
}

func (r *AuthPacket) Encode(e *Encoder) {
	e.Int32(r.Type)
	e.UString(r.Scheme)
	e.Buffer(r.Auth)
}

func (r *AuthPacket) Decode(d *Decoder) error {
	r.Type = d.Int32()
	r.Scheme = d.UString()
	r.Auth = d.Buffer()
	return d.Err()
}

// SASLRequest carries a SASL token (GetSASLRequest, op sasl).
type SASLRequest struct{ Token []byte }

func (r *SASLRequest) Encode(e *Encoder)       { e.Buffer(r.Token) }
func (r *SASLRequest) Decode(d *Decoder) error { r.Token = d.Buffer(); return d.Err() }

// SASLResponse answers a SASLRequest (SetSASLResponse).
type SASLResponse struct{ Token []byte }

func (r *SASLResponse) Encode(e *Encoder)       { e.Buffer(r.Token) }
func (r *SASLResponse) Decode(d *Decoder) error { r.Token = d.Buffer(); return d.Err() }

// ClientInfo is one identity in a WhoAmIResponse.
type ClientInfo struct {
	AuthScheme string
	User       string
}

// WhoAmIResponse answers whoAmI (which has no request body).
type WhoAmIResponse struct{ ClientInfo []ClientInfo }

func (r *WhoAmIResponse) Encode(e *Encoder) {
	e.Int32(int32(len(r.ClientInfo)))
	for _, c := range r.ClientInfo {
		e.UString(c.AuthScheme)
		e.UString(c.User)
	}
}

func (r *WhoAmIResponse) Decode(d *Decoder) error {
	n, null := d.VectorLen(8)
	r.ClientInfo = nil
	if null || d.Err() != nil {
		return d.Err()
	}
	r.ClientInfo = make([]ClientInfo, n)
	for i := range r.ClientInfo {
		r.ClientInfo[i].AuthScheme = d.UString()
		r.ClientInfo[i].User = d.UString()
	}
	return d.Err()
}

// ErrorResponse is a bare error code: the body of a failed op in a multi
// response, and (with Err OK) the body ZooKeeper sends in reply to addWatch.
type ErrorResponse struct{ Err vocab.Code }

func (r *ErrorResponse) Encode(e *Encoder)       { e.Int32(int32(r.Err)) }
func (r *ErrorResponse) Decode(d *Decoder) error { r.Err = vocab.Code(d.Int32()); return d.Err() }
