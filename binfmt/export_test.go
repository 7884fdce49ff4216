package binfmt

// The stacks' layout, for the tests.
const (
	StackTop   = stackTop
	StackPages = stackPages
)
