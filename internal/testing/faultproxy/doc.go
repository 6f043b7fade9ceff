// Package faultproxy is a TCP proxy for chaos tests, in front of one Redis
// or PostgreSQL server: it can Cut connections, Freeze them (a partition
// without resets), delay them, Retarget new ones to another server (a
// failover), and drop the reply to a request after the server executed
// it (DropReplies, SetDropRate), with matchers for Redis scripts and
// PostgreSQL statements. Proxy.Stats says what it did, so that a test
// sees its fault happen.
package faultproxy
