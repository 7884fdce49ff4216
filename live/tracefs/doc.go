// Package tracefs reads kernel tracepoints through a private ftrace
// instance: a directory mmlab-RUN-N under the tracefs instances directory,
// RUN the process's live.RunName, with its own ring buffer, clock, event
// selection and pid filter, so that it neither sees nor disturbs another
// tracer's setup. Root finds tracefs, mounting it where it is not, as perf
// does; New creates an instance (Linux, root), Close removes it, and the
// next mmlab run removes those of a run that was killed; Parse reads the
// text of its trace file.
package tracefs
