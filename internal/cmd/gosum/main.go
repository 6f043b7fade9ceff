// Command gosum prints what a user's go.sum holds after importing some of
// snowkey's packages (see package consumer): its line count and the
// modules it names.
//
//	go run ./internal/cmd/gosum github.com/snowkeyhq/snowkey/idtype
//	go run ./internal/cmd/gosum github.com/snowkeyhq/snowkey/extra/snowkeyprom
//
// Run it from the root of the checkout (or pass -repo). It uses the
// go command's environment as it is, so it may download what the module
// cache lacks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/snowkeyhq/snowkey/internal/checks/consumer"
)

func main() {
	repo := flag.String("repo", ".", "the root of the snowkey checkout")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: gosum [-repo DIR] IMPORT_PATH...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "snowkey-consumer-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	sum, err := consumer.GoSum(ctx, dir, *repo, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("go.sum: %d lines, %d modules\n", sum.Lines, len(sum.Modules))
	for _, m := range sum.Modules {
		fmt.Println("  " + m)
	}
}
