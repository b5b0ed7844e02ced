//go:build !unix

package kafka

import (
	"fmt"
	"os"
)

// lockDir opens path; on systems without flock the directory is not guarded
// against a second process.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	return f, nil
}

// unlockDir closes the file opened by lockDir.
func unlockDir(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("unlock data dir: %w", err)
	}
	return nil
}
