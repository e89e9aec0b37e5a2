package sessions

import (
	"coord/vocab"
	"reflect"
	"strings"
	"testing"
)

// The expected orders were printed by ZooKeeper 3.8's own classes: Ids
// added in this order to Collections.newSetFromMap(new ConcurrentHashMap<>())
// (ServerCnxn.authInfo) and listed as getAuthInfo lists them. Each list is
// "scheme|id;..."; the case with 31 ids goes through two resizes.
func TestWhoAmIOrder(t *testing.T) {
	parse := func(s string) []vocab.Id {
		var ids []vocab.Id
		for _, p := range strings.Split(strings.TrimSuffix(s, ";"), ";") {
			scheme, id, _ := strings.Cut(p, "|")
			ids = append(ids, vocab.Id{Scheme: scheme, ID: id})
		}
		return ids
	}
	for i, tc := range []struct{ in, want string }{
		{"ip|127.0.0.1;sasl|bob;",
			"sasl|bob;ip|127.0.0.1;"},
		{"ip|127.0.0.1;x509|CN=coord test client;",
			"ip|127.0.0.1;x509|CN=coord test client;"},
		{"ip|127.0.0.1;super|;digest|super:lK75jTNcA+U9vtVEw5vB51mj/w4=;",
			"super|;digest|super:lK75jTNcA+U9vtVEw5vB51mj/w4=;ip|127.0.0.1;"},
		{"ip|10.1.2.3;digest|u0:h0;digest|u1:h7;digest|u2:h14;digest|u3:h21;digest|u4:h28;digest|u5:h35;digest|u6:h42;digest|u7:h49;digest|u8:h56;digest|u9:h63;digest|u10:h70;digest|u11:h77;digest|u12:h84;digest|u13:h91;digest|u14:h98;digest|u15:h105;digest|u16:h112;digest|u17:h119;digest|u18:h126;digest|u19:h133;digest|u20:h140;digest|u21:h147;digest|u22:h154;digest|u23:h161;digest|u24:h168;digest|u25:h175;digest|u26:h182;digest|u27:h189;digest|u28:h196;digest|u29:h203;",
			"digest|u1:h7;digest|u9:h63;digest|u27:h189;digest|u24:h168;digest|u21:h147;digest|u2:h14;digest|u14:h98;digest|u4:h28;digest|u8:h56;digest|u6:h42;digest|u19:h133;digest|u29:h203;digest|u10:h70;digest|u16:h112;digest|u18:h126;digest|u20:h140;digest|u11:h77;digest|u23:h161;digest|u26:h182;digest|u12:h84;digest|u0:h0;digest|u25:h175;digest|u17:h119;digest|u28:h196;ip|10.1.2.3;digest|u3:h21;digest|u15:h105;digest|u5:h35;digest|u22:h154;digest|u13:h91;digest|u7:h49;"},
		{"ip|127.0.0.1;digest|bob:x;digest|bob:x;sasl|bob;x509|CN=é;",
			"x509|CN=é;sasl|bob;ip|127.0.0.1;digest|bob:x;"},
	} {
		in, want := parse(tc.in), parse(tc.want)
		if got := whoAmIOrder(in); !reflect.DeepEqual(got, want) {
			t.Errorf("case %d: whoAmIOrder(%v)\n got %v\nwant %v", i, in, got, want)
		}
	}
}
