// Command apifile writes or checks the API files of every released module
// of the repository it runs in (see package apifile): with -w it writes
// api/*.txt; without, it fails, printing the difference, when any file is
// not what the code exports. make api runs it with -w.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/snowkeyhq/snowkey/internal/checks/apifile"
)

func main() {
	write := flag.Bool("w", false, "write the API files instead of checking them")
	root := flag.String("C", ".", "the repository root")
	flag.Parse()
	ctx := context.Background()
	if *write {
		files, err := apifile.Write(ctx, *root)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, f := range files {
			fmt.Println("wrote", f)
		}
		return
	}
	diffs, err := apifile.Check(ctx, *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(diffs) > 0 {
		for _, d := range diffs {
			fmt.Fprint(os.Stderr, d)
		}
		fmt.Fprintln(os.Stderr, "the exported API changed: review the difference and run make api")
		os.Exit(1)
	}
}
