package api

import (
	"slices"
	"testing"

	"coord/vocab"
)

func TestVocabRoundTrip(t *testing.T) {
	st := vocab.Stat{Czxid: 1, Mzxid: 2, Ctime: 3, Mtime: 4, Version: 5, Cversion: 6, Aversion: 7,
		EphemeralOwner: 8, DataLength: 9, NumChildren: 10, Pzxid: 11}
	if got := StatFromAPI(StatToAPI(st)); got != st {
		t.Fatalf("Stat round trip: %+v", got)
	}
	if got := StatFromAPI(nil); got != (vocab.Stat{}) {
		t.Fatalf("nil Stat: %+v", got)
	}
	acl := []vocab.ACL{{Perms: vocab.PermRead, ID: vocab.Id{Scheme: "digest", ID: "u:h"}}, vocab.OpenACLUnsafe[0]}
	if got := ACLFromAPI(ACLToAPI(acl)); !slices.Equal(got, acl) {
		t.Fatalf("ACL round trip keeps order: %v", got)
	}
	// A nil entry or one without an id maps to an empty id (InvalidACL at
	// the server), keeping its place.
	got := ACLFromAPI([]*ACL{nil, {Perms: 1}})
	if len(got) != 2 || got[0] != (vocab.ACL{}) || got[1] != (vocab.ACL{Perms: 1}) {
		t.Fatalf("nil entries: %v", got)
	}
}
