package watchfile

import (
	"context"
	"io/fs"
	"time"
)

// Stamp identifies one version of a file. The zero Stamp is no file.
type Stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// StampOf returns the stamp of the file fi describes.
func StampOf(fi fs.FileInfo) Stamp {
	s := Stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	sysStamp(fi, &s)
	return s
}

// Every calls poll every interval (a second when interval ≤ 0) until ctx
// ends.
func Every(ctx context.Context, interval time.Duration, poll func()) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			poll()
		}
	}
}
