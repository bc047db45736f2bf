//go:build unix

package hub

import (
	"os"
	"syscall"
)

// tryLock takes an flock without waiting; ok is false when another holds it.
func tryLock(f *os.File, exclusive bool) (ok bool, err error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EWOULDBLOCK:
			return false, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}
