package listener

// fileStamp identifies one version of a file (stampOf fills it); the watch
// of the TLS files compares stamps, as gateway/auth's watch of the password
// file does.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}
