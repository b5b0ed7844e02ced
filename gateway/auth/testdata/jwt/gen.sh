#!/bin/sh
# Regenerates the fixtures of this directory with tools independent of the
# Go code under test (OpenSSL for the keys, Python's "cryptography" for the
# JWKS and the tokens). The private keys live in a temporary directory and
# are deleted: nothing here can sign a token. Run from this directory.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp/rsa.key" 2>/dev/null
openssl pkey -in "$tmp/rsa.key" -pubout -out rsa.pub.pem
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/ec.key"
openssl req -new -x509 -key "$tmp/ec.key" -subj /CN=shoal-test-issuer -days 36500 -out ec-p256.crt
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp/enc.key" 2>/dev/null

python3 - "$tmp" <<'PY'
import base64, json, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

tmp = sys.argv[1]
def load(name):
    with open(f"{tmp}/{name}", "rb") as f:
        return serialization.load_pem_private_key(f.read(), None)
def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def uint(n, size=None):
    return b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))

rsa_key, ec_key, enc_key = load("rsa.key"), load("ec.key"), load("enc.key")
def rsa_jwk(k, **kw):
    n = k.public_key().public_numbers()
    return dict(kty="RSA", n=uint(n.n), e=uint(n.e), **kw)
ecn = ec_key.public_key().public_numbers()
keys = [
    rsa_jwk(rsa_key, kid="rsa-2026", use="sig", alg="RS256"),
    dict(kty="EC", crv="P-256", x=uint(ecn.x, 32), y=uint(ecn.y, 32), kid="ec-2026", use="sig"),
    rsa_jwk(enc_key, kid="enc-2026", use="enc", alg="RSA-OAEP-256"),
]
with open("jwks.json", "w") as f:
    json.dump({"keys": keys}, f, indent=2)
    f.write("\n")

claims = {"iss": "https://idp.example", "aud": "shoal", "sub": "acme-alice",
          "tenant": "acme", "iat": 1767225600, "exp": 4102444800}  # 2026-01-01, 2100-01-01
def token(header, sign):
    signing_input = b64(json.dumps(header, separators=(",", ":")).encode()) + "." + \
        b64(json.dumps(claims, separators=(",", ":")).encode())
    return signing_input + "." + b64(sign(signing_input.encode())) + "\n"
def es256(data):
    r, s = decode_dss_signature(ec_key.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")
with open("rs256.jwt", "w") as f:
    f.write(token({"alg": "RS256", "typ": "JWT", "kid": "rsa-2026"},
                  lambda d: rsa_key.sign(d, padding.PKCS1v15(), hashes.SHA256())))
with open("es256.jwt", "w") as f:
    f.write(token({"alg": "ES256", "typ": "JWT", "kid": "ec-2026"}, es256))
PY
