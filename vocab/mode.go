package vocab

// CreateMode is ZooKeeper's create flag value.
type CreateMode int32

// ZooKeeper's CreateMode flags.
const (
	ModePersistent              CreateMode = 0
	ModeEphemeral               CreateMode = 1
	ModePersistentSequential    CreateMode = 2
	ModeEphemeralSequential     CreateMode = 3
	ModeContainer               CreateMode = 4
	ModePersistentTTL           CreateMode = 5
	ModePersistentSequentialTTL CreateMode = 6
)

// Valid reports whether m is one of ZooKeeper's create modes.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialTTL }

// IsSequential reports whether the server appends a sequence suffix.
func (m CreateMode) IsSequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialTTL
}

// IsEphemeral reports whether the node belongs to the creating session.
func (m CreateMode) IsEphemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// IsTTL reports whether the node is a TTL node.
func (m CreateMode) IsTTL() bool { return m == ModePersistentTTL || m == ModePersistentSequentialTTL }

// IsContainer reports whether the node is a container.
func (m CreateMode) IsContainer() bool { return m == ModeContainer }
