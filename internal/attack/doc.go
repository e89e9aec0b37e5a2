// Package attack holds only tests: the attack suite of docs/security.md. It
// starts real coord processes (plaintext, and TLS on every port with peer
// certificates), runs a write load and a victim session holding a lock, and
// tries each door of each server as a stranger, as an application's client
// certificate and as a process with a wrong cluster key: the peer plane
// (raft, forward, touch, join, gossip), the admin plane (snapshot, sessions,
// membership) and the client plane's four-letter words, pprof and reconfig.
// Every attempt must be refused with a clear error and change nothing, while
// the members go on working. A binary built with the peerplanted tag (the
// peer check removed) must fail the suite.
package attack
