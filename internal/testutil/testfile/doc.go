// Package testfile helps the tests of files that are watched and
// reloaded (the password file, the ACL file): Replace changes a file the
// way editors and atomic writers do, WaitFor polls until the change is in
// force.
package testfile
