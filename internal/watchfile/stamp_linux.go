package watchfile

import (
	"io/fs"
	"syscall"
)

// sysStamp adds the device, inode and change time.
func sysStamp(fi fs.FileInfo, s *Stamp) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = st.Dev, st.Ino
		s.ctime = st.Ctim.Nano()
	}
}
