// Package auth checks MQTT user names and passwords against a password file,
// reloads that file while the broker runs, and slows down addresses that
// keep failing.
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
