// Command snowkey decodes, generates and bounds snowflake IDs from the
// shell, moves a database's serial keys onto snowflakes, and checks the
// worker numbers of database servers. It only calls snowkey's packages
// (idtype; pgkit/adopt for adopt; migrations and workerid for
// servers); every layout flag maps to a field of idtype.Layout.
//
//	snowkey decode 2116681624581046272 [--json]
//	snowkey gen -n 5 --worker 3      (--worker is required)
//	snowkey at 2026-11-01T00:00:00Z
//	snowkey adopt --dry-run users posts (see adopt.go)
//	snowkey servers --redis redis://cache:6379 postgres://a/app postgres://b/app (see servers.go)
//	snowkey version                  (or --version: the module version it was built from)
//
// Exit status: 0 on success, 1 when an input is bad, an ID cannot be
// issued, adopt refuses, fails or is not confirmed, or servers finds two
// snowflake_id()s that would repeat each other's IDs; 2 on a usage error
// (an unknown flag, a missing argument), which is printed once, on
// standard error.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

const usage = `snowkey works with 64-bit snowflake IDs.

Usage:
  snowkey decode [flags] <id>...      time, worker and sequence of each ID
  snowkey gen [flags] -n N --worker W N new IDs, one a line
  snowkey at [flags] <RFC 3339 time>   the first ID at that time, for
                                       WHERE id >= ... range queries
  snowkey adopt [flags] <table>...     move serial keys onto snowflakes
  snowkey servers [flags] <URL>...     the worker number each database's
                                       snowflake_id() issues on; fails when
                                       two would repeat each other's IDs
  snowkey version                      the module version and Go release it
                                       was built from (also --version)

Layout flags (all commands; the default is 41/10/12 with Twitter's epoch):
  --epoch RFC3339|unix-ms   time zero of the layout
  --worker-bits N           width of the worker number (default 10)
  --sequence-bits N         width of the sequence (default 12)

Run 'snowkey <command> --help' for a command's own flags.
`

// errUsage marks errors that are the caller's invocation, exit status 2.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status. Output goes
// through one buffer, written out when it fills and when run returns,
// before any error is printed: gen writes millions of lines, and a write
// per line would cost a system call each.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		fmt.Fprint(stdout, version(debug.ReadBuildInfo()))
		return 0
	}
	out := bufio.NewWriterSize(stdout, 64<<10)
	var err error
	switch args[0] {
	case "decode":
		err = decode(args[1:], out, stderr)
	case "gen":
		err = gen(args[1:], out)
	case "at":
		err = at(args[1:], out)
	case "adopt":
		// Unbuffered: adopt asks before it applies, and the question
		// must be on the terminal before it reads the answer.
		err = adoptCmd(args[1:], os.Stdin, stdout, stderr)
	case "servers":
		err = serversCmd(args[1:], out, stderr)
	default:
		fmt.Fprintf(stderr, "snowkey: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "snowkey %s: %v\nRun 'snowkey %s --help' for usage.\n", args[0], err, args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "snowkey %s: %v\n", args[0], err)
		return 1
	}
}

// layoutFlags adds the layout flags to fs and returns a function that
// builds the layout once fs is parsed.
func layoutFlags(fs *flag.FlagSet) func() (idtype.Layout, error) {
	epoch := fs.String("epoch", "", "time zero of the layout, RFC 3339 or Unix milliseconds (default Twitter's, 1288834974657)")
	workerBits := fs.Uint("worker-bits", idtype.DefaultLayout.WorkerBits, "width of the worker number")
	sequenceBits := fs.Uint("sequence-bits", idtype.DefaultLayout.SequenceBits, "width of the sequence")
	return func() (idtype.Layout, error) {
		l := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: *workerBits, SequenceBits: *sequenceBits}
		if *epoch != "" {
			t, err := parseTime(*epoch)
			if err != nil {
				return l, fmt.Errorf("%w: --epoch: %v", errUsage, err)
			}
			l.Epoch = t
		}
		if err := l.Validate(); err != nil {
			return l, fmt.Errorf("%w: %v", errUsage, err)
		}
		return l, nil
	}
}

// parseTime reads RFC 3339 or Unix milliseconds.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	id, err := idtype.Parse(s) // a plain non-negative decimal
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2006-01-02T15:04:05Z) nor Unix milliseconds", s)
	}
	return time.UnixMilli(int64(id)).UTC(), nil
}

// parseArgs parses flags wherever they stand among the arguments, as in
// "snowkey decode 123 --json", and returns the other arguments in order.
// The standard flag package stops at the first non-flag, which would make
// "--json" an ID. Everything after "--" is an argument, and so is a
// negative number, as in "snowkey decode -1", which is a bad ID to report,
// not an unknown flag.
//
// A flag error wraps errUsage; --help prints the command's help to out and
// returns flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string, out io.Writer) ([]string, error) {
	var rest []string
	for {
		if len(args) > 0 && isNegativeNumber(args[0]) {
			rest = append(rest, args[0])
			args = args[1:]
			continue
		}
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
			return nil, err
		} else if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		left := fs.Args()
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// isNegativeNumber reports whether arg is "-" and a digit, an argument
// and not a flag: no flag's name starts with a digit.
func isNegativeNumber(arg string) bool {
	return len(arg) > 1 && arg[0] == '-' && arg[1] >= '0' && arg[1] <= '9'
}

// newFlagSet returns a flag set that prints nothing itself: run prints a
// flag error once, and parseArgs prints the help when asked.
func newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// decoded is one ID taken apart, as decode prints it.
type decoded struct {
	ID       idtype.ID `json:"id"`
	Time     time.Time `json:"time"`
	Worker   int64     `json:"worker"`
	Sequence int64     `json:"sequence"`
}

func decode(args []string, stdout *bufio.Writer, stderr io.Writer) error {
	fs := newFlagSet("decode", "Usage: snowkey decode [flags] <id>...\n\nPrints the time, worker and sequence of each ID.\n\n")
	asJSON := fs.Bool("json", false, "print one JSON object a line")
	layout := layoutFlags(fs)
	ids, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	l, err := layout()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: no ID given", errUsage)
	}
	enc := json.NewEncoder(stdout)
	var bad error
	for _, arg := range ids {
		id, err := idtype.Parse(arg)
		if err != nil {
			// In order with the lines before it, when both go to a terminal.
			if err := stdout.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "snowkey decode: %v\n", err)
			bad = errors.New("some IDs could not be read")
			continue
		}
		p := l.Decode(id)
		d := decoded{ID: id, Time: p.Time, Worker: p.Worker, Sequence: p.Sequence}
		if *asJSON {
			if err := enc.Encode(d); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "%d\ttime=%s\tworker=%d\tsequence=%d\n", id, p.Time.Format(time.RFC3339Nano), p.Worker, p.Sequence)
	}
	return bad
}

func gen(args []string, stdout io.Writer) error {
	fs := newFlagSet("gen", "Usage: snowkey gen [flags] --worker W\n\nPrints new IDs, one a line. --worker is required: give each process that\ngenerates IDs its own number, one that no app lease and no database\n(snowflake_reserved_worker()) uses; two generators with one worker number\nissue the same IDs.\n\n")
	n := fs.Int("n", 1, "how many IDs")
	worker := fs.Int64("worker", 0, "worker number, 0 to 2^worker-bits - 1 (required)")
	layout := layoutFlags(fs)
	extra, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(extra) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, extra[0])
	}
	// There is no safe default: two runs that share a number issue the
	// same IDs, and 0, the obvious default, is the first number an app's
	// lease takes.
	if !flagSet(fs, "worker") {
		return fmt.Errorf("%w: --worker is required: give this run a worker number that no other generator "+
			"(a parallel run, an app lease, a database's reserved worker) uses", errUsage)
	}
	if *n < 0 {
		return fmt.Errorf("%w: -n %d is negative", errUsage, *n)
	}
	l, err := layout()
	if err != nil {
		return err
	}
	g, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: *worker, Layout: l})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	// One NextN takes what one millisecond holds, 2^SequenceBits IDs, so
	// that it waits for the clock at most once, well within the
	// generator's MaxWait, whatever the layout: a single NextN of more
	// would have to wait for several milliseconds in one call (and fail
	// with ErrClockBehind past MaxWait, 1,000 IDs with --sequence-bits 0).
	buf := make([]idtype.ID, min(*n, int(l.MaxSequence()+1), maxBatch))
	var line []byte
	for left := *n; left > 0; left -= len(buf) {
		buf = buf[:min(left, len(buf))]
		if err := g.NextN(buf); err != nil {
			return err
		}
		line = line[:0]
		for _, id := range buf {
			line, _ = id.AppendText(line)
			line = append(line, '\n')
		}
		if _, err := stdout.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// maxBatch bounds one NextN of gen, and so its buffers, for layouts whose
// millisecond holds millions of IDs.
const maxBatch = 4096

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func at(args []string, stdout io.Writer) error {
	fs := newFlagSet("at", "Usage: snowkey at [flags] <RFC 3339 time>\n\nPrints the smallest ID any worker can issue at that time:\n  SELECT ... WHERE id >= <it>\n\n")
	layout := layoutFlags(fs)
	times, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	l, err := layout()
	if err != nil {
		return err
	}
	if len(times) != 1 {
		return fmt.Errorf("%w: want one time, got %d arguments", errUsage, len(times))
	}
	t, err := time.Parse(time.RFC3339Nano, times[0])
	if err != nil {
		return fmt.Errorf("%w: %q is not an RFC 3339 time (2006-01-02T15:04:05Z)", errUsage, times[0])
	}
	fmt.Fprintln(stdout, l.FirstID(t))
	return nil
}
