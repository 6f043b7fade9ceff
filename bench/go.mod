module github.com/snowkeyhq/snowkey/bench

// Not released: no user imports this module; it gets no tag and no API
// file (see internal/checks/apifile).

go 1.26.0

require github.com/snowkeyhq/snowkey v0.0.0

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/jackc/pgx/v5 v5.12.0 // indirect
)

replace github.com/snowkeyhq/snowkey => ../
