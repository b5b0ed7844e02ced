// Package watchfile keeps a file parsed and in force, reloading it when it
// changes: what the gateway's reloadable files (password file, JWT keys,
// ACL file, TLS material) share. File[T] is one file parsed into a T; a
// version that fails to read or parse keeps the previous one in force.
// A Stamp tells versions apart: size and modification time and, on Linux,
// device, inode and change time, so that a file replaced by a rename or
// rewritten in place is noticed even when its size and modification time
// repeat. Every polls on a ticker until its context ends.
package watchfile
