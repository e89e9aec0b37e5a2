// Package zk is ZooKeeper's client wire protocol, without any state: the
// jute codec, every record a ZooKeeper 3.8/3.9 client sends or receives, the
// op codes, special xids, states and event types, length-prefixed framing,
// four-letter-word detection and the text those commands print. The server
// (server/) uses it to speak to unmodified ZooKeeper clients (Java/Curator,
// C, kazoo, go-zookeeper); what the bytes mean for the tree is fsm's job.
//
// # The wire
//
// A connection is a stream of frames, each a 4-byte big-endian length and a
// body. The first frame each way is the handshake (ConnectRequest,
// ConnectResponse, with no header). After it a request is a RequestHeader
// {xid, type} and a body chosen by the type (NewRequest, DecodeRequest);
// a reply is a ReplyHeader {xid, zxid, err} and, when err is OK, a body.
// Notifications are replies with xid -1 and a WatcherEvent body. Before the
// handshake the first 4 bytes may instead be a four-letter word
// (IsFourLetterWord). Error codes are vocab.Code, whose values are
// ZooKeeper's, so they go on the wire unchanged (CodeOf maps errors).
//
// Jute: int and long are big-endian two's complement; a boolean is one
// byte; a buffer or ustring is an int length (-1 for null) and the bytes; a
// vector is an int count (-1 for null) and the elements; a record is its
// fields in order, with no framing of its own.
//
// # Invariants
//
//   - Decoding never panics, whatever the input, and never allocates more
//     than the input can justify: every length and count is checked against
//     the bytes left before anything is allocated, so a decoded record holds
//     at most a small multiple of its frame's size (under 40 bytes per input
//     byte; 8 for the densest request, a multi of empty reads), and a frame by the max given to
//     ReadFrame (DefaultMaxFrame, ZooKeeper's jute.maxbuffer). Decoded
//     buffers and strings are copies; the frame may be reused.
//   - Anything Decode accepts, Encode writes back in canonical form, which
//     decodes again and re-encodes to the same bytes (fuzzed). The canonical
//     form may differ from the input: a non-zero boolean byte becomes 1, a
//     null string becomes "", a null vector becomes an empty one, and bytes
//     after a record are dropped (ZooKeeper ignores them).
//   - Null and empty are kept apart where ZooKeeper's clients see the
//     difference: a nil []byte is a null buffer (getData of a node created
//     with null data returns null), []byte{} an empty one. Vectors are
//     never written as null, since ZooKeeper never sends one and
//     go-zookeeper cannot read one; Decode still reports a null vector as
//     nil and an empty one as a non-nil empty slice.
//   - The package holds no state, reads no clock and does no I/O of its own
//     (ReadFrame reads only the io.Reader it is given).
//
// # Protocol details worth knowing
//
//   - The ConnectRequest's trailing readOnly byte is optional (go-zookeeper
//     and pre-3.4 clients omit it); ZooKeeper answers with the readOnly byte
//     only if the request had it. ConnectRequest.Response does the same.
//   - A multi has no count: each op is a MultiHeader{type, done=false,
//     err=-1} and its body, ended by {-1, true, -1}. In the response a
//     failed op is {type -1, done=false, err} with an ErrorResponse body.
//     A failed multi has ReplyHeader.Err OK; the codes are per op
//     (MultiFailure). multiRead runs every op and reports each failure.
//   - ReplyHeader.Zxid is the server's last applied zxid, for reads too;
//     the Java client adopts it as lastZxid only from replies to requests.
package zk
