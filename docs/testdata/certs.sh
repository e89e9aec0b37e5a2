#!/bin/sh
# Certificates for coord (docs/security.md): a CA for the client and admin ports, a server
# certificate, a client certificate, and a peer CA of its own with a peer certificate per server.
# Usage: certs.sh DIR [SERVER-NAME...]   (default name: localhost; every name becomes a DNS
# subject alternative name of the server certificate, beside IP 127.0.0.1)
set -eu
dir=${1:?usage: certs.sh DIR [SERVER-NAME...]}
shift
[ $# -gt 0 ] || set -- localhost
mkdir -p "$dir"
cd "$dir"
umask 077

san=""
for name in "$@"; do san="${san}DNS:$name,"; done
san="${san}IP:127.0.0.1"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() { # ca NAME SUBJECT
  key "$1-key.pem"
  openssl req -x509 -new -key "$1-key.pem" -subj "$2" -days 3650 -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
cert() { # cert NAME SUBJECT CA EXTENSIONS
  key "$1-key.pem"
  openssl req -new -key "$1-key.pem" -subj "$2" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3-key.pem" -CAcreateserial -days 825 \
    -extfile "$1.ext" -out "$1.pem"
  rm "$1.csr" "$1.ext"
}
usage='basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment'

# ca.pem: -tls-ca on the servers (it signs client certificates) and the CA clients trust.
ca ca "/CN=coord CA"
# server.pem: -tls-cert/-tls-key on every server; clients check the name they dial against it.
cert server "/CN=coord server" ca "$usage
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
# client.pem: an application's certificate; its session holds the identity x509:CN=app1.
cert client "/CN=app1" ca "$usage
extendedKeyUsage=clientAuth"

# peer-ca.pem: -peer-ca, signs servers' peer certificates and nothing else.
ca peer-ca "/CN=coord peer CA"
# peer-NAME.pem: -peer-cert/-peer-key of server NAME (presented on both ends of peer connections).
for name in "$@"; do
  cert "peer-$name" "/CN=$name" peer-ca "$usage
extendedKeyUsage=serverAuth,clientAuth"
done
chmod 644 ./*.pem
chmod 600 ./*-key.pem
