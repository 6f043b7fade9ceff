module github.com/snowkeyhq/snowkey

go 1.26
