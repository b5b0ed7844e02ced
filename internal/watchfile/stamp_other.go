//go:build !linux

package watchfile

import "io/fs"

// sysStamp adds nothing: size and modification time only off Linux.
func sysStamp(fs.FileInfo, *Stamp) {}
