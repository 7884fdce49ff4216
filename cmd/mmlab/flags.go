package main

import (
	"errors"
	"flag"

	"mmlab/experiment"
)

// parseInterleaved parses args with fs, allowing flags after positional
// arguments ("mmlab report DIR -o OUT"), and returns the positionals. A
// lone "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagsFailed ends a command whose flags did not parse with err and
// returns its exit status: for -h or --help, help() prints the usage and
// the status is 0; otherwise bad(err) says what is wrong and the status is
// 2. A nil help or bad is left to fs, whose Usage and output print them.
func flagsFailed(err error, help func(), bad func(error)) int {
	if errors.Is(err, flag.ErrHelp) {
		if help != nil {
			help()
		}
		return experiment.ExitOK
	}
	if bad != nil {
		bad(err)
	}
	return experiment.ExitUsage
}
