package sessions

import (
	"bytes"
	"coord/vocab"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SASL DIGEST-MD5 (RFC 2831) as ZooKeeper serves it to clients that log
// in with a user name and password (the Java client with a JAAS Client
// section, kazoo's sasl_options, the C client): ZooKeeper fixes the realm
// and server name to "zk-sasl-md5" and the service to "zookeeper", offers
// qop "auth" only, and gives a session that logs in the identity
// sasl:<user>. The users and passwords are the server's (Config.SASLUsers).

const (
	saslRealm     = "zk-sasl-md5"
	saslDigestURI = "zookeeper/" + saslRealm
)

var errSASLFailed = errors.New("SASL authentication failed")

// saslDigest is one connection's DIGEST-MD5 exchange.
type saslDigest struct {
	users map[string]string
	nonce string
	done  bool
}

// step answers one client token: the challenge for the first (empty)
// token, rspauth for a valid digest-response. It returns the identity the
// session gains when the exchange completes.
func (d *saslDigest) step(token []byte) (reply []byte, id *vocab.Id, err error) {
	switch {
	case d.done:
		return nil, nil, fmt.Errorf("%w: the exchange is already complete", errSASLFailed)
	case d.nonce == "":
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		d.nonce = base64.StdEncoding.EncodeToString(b[:])
		return fmt.Appendf(nil, `realm="%s",nonce="%s",qop="auth",charset=utf-8,algorithm=md5-sess`, saslRealm, d.nonce), nil, nil
	}
	f := parseDigestFields(token)
	user := f["username"]
	pw, known := d.users[user]
	switch {
	case !known:
		return nil, nil, fmt.Errorf("%w: unknown user %q", errSASLFailed, user)
	case f["nonce"] != d.nonce:
		return nil, nil, fmt.Errorf("%w: wrong nonce", errSASLFailed)
	case f["digest-uri"] != saslDigestURI:
		return nil, nil, fmt.Errorf("%w: digest-uri %q, want %q", errSASLFailed, f["digest-uri"], saslDigestURI)
	case f["qop"] != "" && f["qop"] != "auth":
		return nil, nil, fmt.Errorf("%w: qop %q (only auth is offered)", errSASLFailed, f["qop"])
	}
	realm := f["realm"]
	if realm == "" {
		realm = saslRealm
	}
	qop := f["qop"]
	if qop == "" {
		qop = "auth"
	}
	key := md5.Sum([]byte(user + ":" + realm + ":" + pw))
	a1 := append(key[:], ":"+d.nonce+":"+f["cnonce"]...)
	if authzid := f["authzid"]; authzid != "" {
		a1 = append(a1, ":"+authzid...)
	}
	ha1 := md5Hex(a1)
	kd := func(a2 string) string {
		return md5Hex([]byte(ha1 + ":" + d.nonce + ":" + f["nc"] + ":" + f["cnonce"] + ":" + qop + ":" + md5Hex([]byte(a2))))
	}
	if want := kd("AUTHENTICATE:" + f["digest-uri"]); subtle.ConstantTimeCompare([]byte(want), []byte(f["response"])) != 1 {
		return nil, nil, fmt.Errorf("%w: wrong password for %q", errSASLFailed, user)
	}
	d.done = true
	name := user
	if authzid := f["authzid"]; authzid != "" {
		name = authzid
	}
	return []byte("rspauth=" + kd(":"+f["digest-uri"])), &vocab.Id{Scheme: "sasl", ID: name}, nil
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// parseDigestFields reads a digest-response: comma-separated key=value
// pairs, values optionally quoted with backslash escapes.
func parseDigestFields(b []byte) map[string]string {
	out := map[string]string{}
	for len(b) > 0 {
		eq := bytes.IndexByte(b, '=')
		if eq < 0 {
			break
		}
		key := strings.ToLower(strings.TrimSpace(string(b[:eq])))
		b = b[eq+1:]
		var val []byte
		if len(b) > 0 && b[0] == '"' {
			b = b[1:]
			for len(b) > 0 && b[0] != '"' {
				if b[0] == '\\' && len(b) > 1 {
					b = b[1:]
				}
				val = append(val, b[0])
				b = b[1:]
			}
			if len(b) > 0 {
				b = b[1:] // the closing quote
			}
			if i := bytes.IndexByte(b, ','); i >= 0 {
				b = b[i+1:]
			} else {
				b = nil
			}
		} else if i := bytes.IndexByte(b, ','); i >= 0 {
			val, b = b[:i], b[i+1:]
		} else {
			val, b = b, nil
		}
		out[key] = strings.TrimSpace(string(val))
	}
	return out
}

// sasl runs one step of the session's SASL exchange (op sasl). A failed
// step answers AuthFailed, and the front end closes the connection, as
// ZooKeeper does.
func (c *Conn) sasl(token []byte) *Reply {
	if len(c.l.cfg.SASLUsers) == 0 {
		return &Reply{Err: vocab.AuthFailed}
	}
	c.mu.Lock()
	if c.saslState == nil {
		c.saslState = &saslDigest{users: c.l.cfg.SASLUsers}
	}
	d := c.saslState
	c.mu.Unlock()
	reply, id, err := d.step(token)
	if err != nil {
		c.l.log.Warn("SASL login refused", "session", sessionHex(c.id), "err", err)
		c.auditAuth("sasl", false)
		return &Reply{Err: vocab.AuthFailed}
	}
	if id != nil {
		c.addIdentity(*id)
		c.auditAuth("sasl", true)
	}
	return &Reply{Body: BodySASL, Data: reply}
}
