// Package auth checks MQTT user names and passwords against a password file,
// or verifies a signed token (JWT) carried in the password, reloads the file
// and the keys while the broker runs, and slows down addresses that keep
// failing.
//
// # The password file
//
// One entry a line, user:hash, as Mosquitto's mosquitto_passwd writes it, so
// a Mosquitto file can be used as it is. Blank lines and lines starting with
// '#' are skipped; blanks around the user name and the hash are dropped (as
// Mosquitto does), and "\r\n" line ends are accepted. A user name is
// non-empty UTF-8 and may not contain ':' (the first ':' ends it). A user
// named twice is an error: a file is refused rather than guessed at (Mosquitto
// and mosquitto_passwd never write a duplicate). Any other malformed line (no
// ':', an empty hash, an unknown format, a bad field) is an error too, where
// the broker Mosquitto skips it silently: a file whose lines are ignored
// locks out users without saying why. Errors name the 1-based line number and
// what is wrong, never the line's text, since a misplaced password may be in
// it.
//
// The hash formats:
//
//   - $7$<iterations>$<salt>$<hash>: Mosquitto's default since 2.0.
//     PBKDF2-HMAC-SHA512 of the password with the salt, a 64-byte key;
//     salt and hash in standard base64 with padding (unpadded is accepted).
//     mosquitto_passwd writes 101 iterations and a 12-byte salt; other salt
//     lengths (newer Mosquitto uses 64 bytes) are accepted.
//   - $6$<salt>$<hash>: Mosquitto 1.6 and earlier (mosquitto_passwd -H
//     sha512). One SHA-512 over the password followed by the salt bytes.
//   - $2a$, $2b$, $2y$: bcrypt (golang.org/x/crypto/bcrypt).
//   - $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>: an argon2id
//     PHC string, unpadded standard base64 (golang.org/x/crypto/argon2).
//     This is what HashPassword, SetPassword and "shoal passwd" write, with
//     m=65536 (64 MiB), t=3, p=2, a 16-byte salt and a 32-byte hash.
//
// Cost parameters are bounded (PBKDF2 at most 2^24 iterations, argon2id at
// most 4 GiB and 2^16 passes) so that a typo cannot make each CONNECT take
// minutes. Plain-text passwords (a file before mosquitto_passwd -U) are
// refused.
//
// Hashes are compared in constant time (crypto/subtle, or bcrypt's own
// comparison). An unknown user costs the same as a known one: the file's
// first entry is checked against the password and the answer dropped. (A
// file mixing cheap and expensive formats still shows which kind a user has;
// keep one format per file.)
//
// SetPassword (and "shoal passwd FILE USER") adds or replaces one entry,
// keeping every other line byte for byte, and replaces the file atomically:
// a temporary file in the same directory with the old file's mode (0600 for
// a new file), synced, then renamed over it.
//
// # Reloading
//
// Passwords holds the file in force. Reload reads it again (the process
// calls it on SIGHUP); Watch polls the file's size, modification time and,
// on Linux, device, inode and change time every interval and reloads when
// they change, so a file replaced by a rename is seen as well as one
// rewritten in place. A version that fails to read or parse leaves the
// previous file in force and is logged (slog, key "err", with the line
// number) once. Write the file atomically (SetPassword does): a poll can
// otherwise read it half written.
//
// # Tokens (JWT)
//
// JWT verifies a compact JWS token (RFC 7519) sent as the CONNECT password;
// one longer than 8 KiB is refused before it is parsed. The keys come from
// local files only, nothing is fetched (a JWKS "x5u" is not followed):
//
//   - hmac_secret_file: the file's bytes, but one trailing line break (\n
//     or \r\n, as editors add), are an HMAC secret of at least 32 bytes;
//     white space before it is kept, with a warning. It takes HS256, and
//     HS384 and HS512 when it is at least 48 and 64 bytes long (RFC 7518
//     §3.2).
//   - public_key_file: PEM blocks "PUBLIC KEY", "RSA PUBLIC KEY" or
//     "CERTIFICATE" (the certificate's key; its dates and chain are not
//     checked). RSA keys of at least 2048 bits take RS256, RS384, RS512,
//     PS256, PS384, PS512; ECDSA keys ES256, ES384 or ES512 by their curve
//     (P-256, P-384, P-521); Ed25519 keys EdDSA. A private key is refused:
//     the broker needs the public part only.
//   - jwks_file: a JSON Web Key Set (RFC 7517), read with keyfunc/jwkset.
//     Keys are taken by their type as above ("oct" keys as HMAC secrets); a
//     key's "alg", when set, is the only one it takes and must fit it. Keys
//     for encryption ("use": "enc", or "key_ops" without "verify") are
//     skipped; two keys with one "kid", or an asymmetric private key, make
//     the file an error.
//
// The algorithms accepted are those of the keys loaded, nothing else: never
// "none", and a key only ever meets an algorithm of its own type, so an HMAC
// secret cannot verify an RS or ES token, nor a public key serve as an HMAC
// secret (the algorithm-confusion attack). A token whose "kid" names a JWKS
// key is checked with that key only; otherwise with every key that takes its
// algorithm (the secret, the PEM keys, and the JWKS keys when it names no
// kid). A "crit" header is refused: no extension is understood.
//
// "exp" is required: a token without one is refused, so that every session
// a token opens can be cut off (Identity.Expires carries it to the
// gateway). "exp", "nbf" and "iat" are checked with the configured skew
// (30s by default, at most 5m): a token is expired from exp+skew on, valid
// from nbf-skew on, and refused when issued after now+skew. When set,
// "iss" must equal the issuer and "aud" must hold the audience. The user is
// the user claim ("sub" by default), a non-empty string; with a tenant
// claim configured the tenant is that claim, a non-empty string the token
// must have, and without one the gateway takes the tenant from the user's
// prefix. A user or tenant holding a control character is refused.
//
// A refused token's error wraps ErrBadCredentials and reads "verify token:
// " and one fixed reason: it never holds any part of the token (a bearer
// credential) or of a key. Reload and Watch work as for the password file,
// over all the configured key files: a version that fails to load (any
// file) leaves the previous keys in force, all of them, and the keys in
// force are swapped whole.
//
// # Delaying failures
//
// Delay remembers consecutive failures per client address: the first
// failure earns base, each further one doubles it, up to cap; a success
// forgets the address, and so do ten caps without a failure. At most max
// addresses are kept, the one whose last failure is oldest is dropped first.
// IPv6 addresses count per /64. The caller decides what to do with the
// duration (wait before answering the CONNECT).
//
// Nothing here logs or returns a password or a hash.
package auth
