// Package pgkit holds snowkey's PostgreSQL helpers that are not
// migrations: loading whole object graphs at COPY speed, and moving an
// existing schema's serial keys onto snowflakes.
package pgkit
