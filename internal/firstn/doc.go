// Package firstn keeps the first n items of a stream in an order, without
// sorting the whole stream: what a page of a listing needs (the gateway's
// connections, the session service's sessions), where the stream is every
// client and the page is 50 of them.
package firstn
