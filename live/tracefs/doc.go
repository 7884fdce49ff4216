// Package tracefs reads kernel tracepoints through a private ftrace
// instance: a directory mmlab-PID-N under the tracefs instances directory
// (/sys/kernel/tracing, else /sys/kernel/debug/tracing), with its own ring
// buffer, clock, event selection and pid filter, so that it neither sees
// nor disturbs another tracer's setup. New creates it (Linux, root),
// Close removes it; Parse reads the text of its trace file.
package tracefs
