// Command shoal runs Shoal's roles. main parses the command line and wires
// the roles; it implements none of them.
package main
