package api

// AdminDigestMetadata is the gRPC metadata key under which an Admin call
// sends the superuser's "user:password" (coordctl's --user): the server
// treats the caller as an admin identity if the credential's digest
// (vocab.Digest) is its -super-digest.
const AdminDigestMetadata = "coord-admin-digest"
