package api

import "coord/vocab"

// The one mapping between the protobuf records and the shared vocabulary's
// types, for the server's front ends and the client alike.

// StatToAPI is s as a protobuf record.
func StatToAPI(s vocab.Stat) *Stat {
	return &Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

// StatFromAPI is s as a vocab.Stat (the zero Stat for nil).
func StatFromAPI(s *Stat) vocab.Stat {
	return vocab.Stat{Czxid: s.GetCzxid(), Mzxid: s.GetMzxid(), Ctime: s.GetCtime(), Mtime: s.GetMtime(),
		Version: s.GetVersion(), Cversion: s.GetCversion(), Aversion: s.GetAversion(),
		EphemeralOwner: s.GetEphemeralOwner(), DataLength: s.GetDataLength(), NumChildren: s.GetNumChildren(),
		Pzxid: s.GetPzxid()}
}

// ACLToAPI is acl as protobuf records.
func ACLToAPI(acl []vocab.ACL) []*ACL {
	out := make([]*ACL, len(acl))
	for i, a := range acl {
		out[i] = &ACL{Perms: int32(a.Perms), Id: &Id{Scheme: a.ID.Scheme, Id: a.ID.ID}}
	}
	return out
}

// ACLFromAPI is acl as vocab.ACLs, in order. A nil entry or one without an
// id becomes an ACL with an empty id, which the server refuses as
// InvalidACL.
func ACLFromAPI(acl []*ACL) []vocab.ACL {
	out := make([]vocab.ACL, len(acl))
	for i, a := range acl {
		out[i] = vocab.ACL{Perms: vocab.Perm(a.GetPerms()), ID: vocab.Id{Scheme: a.GetId().GetScheme(), ID: a.GetId().GetId()}}
	}
	return out
}

// DataFromAPI is a request's or reply's data with its null flag (protobuf
// decodes null and empty data both as nil) in Go's form: nil for
// ZooKeeper's null data, a non-nil empty slice for empty data.
func DataFromAPI(data []byte, null bool) []byte {
	if null {
		return nil
	}
	if data == nil {
		return []byte{}
	}
	return data
}
