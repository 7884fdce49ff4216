package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"
)

// parseArgs parses args with fs and rejects positional arguments. It returns
// flag.ErrHelp for -h and --help.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// oneOf checks that the value given to --name is one of choices.
func oneOf(name, value string, choices ...string) error {
	if slices.Contains(choices, value) {
		return nil
	}
	last := len(choices) - 1
	return fmt.Errorf("--%s %q: want %s or %s", name, value, strings.Join(choices[:last], ", "), choices[last])
}

// checkTarget checks an experiment's --target and --variant; an empty
// variant means all of variants.
func checkTarget(target, variant string, variants ...string) error {
	if err := oneOf("target", target, "model", "live", "both"); err != nil {
		return err
	}
	if variant == "" {
		return nil
	}
	return oneOf("variant", variant, variants...)
}

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
