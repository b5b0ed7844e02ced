package listener

import (
	"io/fs"
	"syscall"
)

// stampOf identifies a version of a file: size and modification time, and
// on Linux the device, inode and change time, so that a file replaced by a
// rename (a new inode, as a Kubernetes secret volume or certbot's symlink
// swap makes) or rewritten in place is noticed even when its size and
// modification time happen to repeat.
func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = st.Dev, st.Ino
		s.ctime = st.Ctim.Nano()
	}
	return s
}
