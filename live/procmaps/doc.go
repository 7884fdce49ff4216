// Package procmaps reads the VMAs of a live Linux process: a streaming,
// allocation-free parser of /proc/PID/maps and a pure-Go PROCMAP_QUERY ioctl
// (Linux 6.11+), behind one Reader.
//
// A full walk streams the text, which the kernel produces faster than one
// ioctl per VMA; a point lookup ("which VMA holds this address") uses the
// ioctl and falls back to scanning the text on kernels without it. Both give
// a VMA whose AppendText re-creates the /proc/PID/maps line byte for byte.
//
// Everything but the types, the parser and the formatter needs Linux; on
// other systems Open returns ErrNotSupported.
package procmaps
