//go:build unix

package kafka

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on path (created if missing),
// held until unlockDir or the end of the process, so that a crashed process
// leaves no stale lock behind.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		closeErr := f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.Join(fmt.Errorf("lock data dir: %s: %w", path, ErrDirInUse), closeErr)
		}
		return nil, errors.Join(fmt.Errorf("lock data dir: %w", err), closeErr)
	}
	return f, nil
}

// unlockDir releases the lock taken by lockDir.
func unlockDir(f *os.File) error {
	if err := f.Close(); err != nil { // closing the descriptor releases the flock
		return fmt.Errorf("unlock data dir: %w", err)
	}
	return nil
}
