package auth

// reason says what is wrong with a line of a password file. Every reason is
// one of the constants below, so an error can never carry text from the
// file (which may be a password or a hash): parse_test.go checks errors
// against this list.
type reason string

const (
	rOK            reason = ""
	rNoColon       reason = "no ':' between user name and hash"
	rEmptyHash     reason = "empty hash"
	rDuplicate     reason = "user already has an entry on an earlier line"
	rLineTooLong   reason = "longer than 131072 bytes" // maxLineLen
	rEmptyUser     reason = "empty user name"
	rUserTooLong   reason = "user name longer than 65535 bytes"
	rUserUTF8      reason = "user name is not valid UTF-8"
	rUserChars     reason = "user name contains ':', a line break or NUL"
	rUserComment   reason = "user name starts with '#' (a comment)"
	rUserBlank     reason = "user name starts or ends with a blank"
	rUnknownFormat reason = "unknown hash format (want $7$, $6$, $2a$/$2b$/$2y$ or $argon2id$)"
	rBcrypt        reason = "malformed bcrypt hash"
	rPBKDF2Shape   reason = "malformed $7$ hash: want $7$<iterations>$<salt>$<hash>"
	rPBKDF2Iter    reason = "malformed $7$ hash: iterations must be a number from 1 to 16777216" // maxPBKDF2Iterations
	rPBKDF2Salt    reason = "malformed $7$ hash: salt is not base64 of 1 to 1024 bytes"
	rPBKDF2Hash    reason = "malformed $7$ hash: hash is not base64 of 64 bytes"
	rSHA512Shape   reason = "malformed $6$ hash: want $6$<salt>$<hash>"
	rSHA512Salt    reason = "malformed $6$ hash: salt is not base64 of 1 to 1024 bytes"
	rSHA512Hash    reason = "malformed $6$ hash: hash is not base64 of 64 bytes"
	rArgon2Shape   reason = "malformed $argon2id$ hash: want $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>"
	rArgon2Version reason = "malformed $argon2id$ hash: only version v=19 is supported"
	rArgon2Params  reason = "malformed $argon2id$ hash: parameters out of range (t from 1 to 65536, p from 1 to 255, m from 8·p to 4194304)"
	rArgon2Salt    reason = "malformed $argon2id$ hash: salt is not unpadded base64 of 8 to 1024 bytes"
	rArgon2Hash    reason = "malformed $argon2id$ hash: hash is not unpadded base64 of 4 to 1024 bytes"
)
