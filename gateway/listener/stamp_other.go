//go:build !linux

package listener

import "io/fs"

// stampOf identifies a version of a file by its size and modification time
// (the inode is read on Linux only: stamp_linux.go).
func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
