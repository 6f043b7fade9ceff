// Package blog is the code sqlc generates from ../sqlc.yaml: the queries
// of ../query.sql on the tables of ../schema.sql, with snowflake keys
// typed as idtype.ID, a nullable key as sqltype.NullID and a bigint[] of
// keys as sqltype.IDs. docs/sqlc.md explains the configuration.
//
// Every other file here is generated; to regenerate them after changing
// the schema, the queries or sqlc.yaml, run sqlc in examples/sqlc:
//
//	go generate ./sqlc/blog    # from examples/, with sqlc on PATH
package blog

//go:generate sqlc generate -f ../sqlc.yaml
