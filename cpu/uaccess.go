package cpu

// Load64 and Store64 are the kernel's get_user/put_user of 8 bytes at addr
// in mem, through the CPU's data TLB (so a uretprobe's return-address swap
// costs what the task's own push would). They may be called from a hook of
// a Run on this CPU. A fault returns the Memory's error and changes nothing.
//
// They are local accesses on the task's behalf, not remote ones: the
// Memory checks them as the task's own data accesses, protection keys
// included (arch_vma_access_permitted() with foreign false), as the
// hardware checks a kernel access to a user page; where the kernel turns
// the fault into EFAULT, the caller does.

// Load64 reads the 8 bytes at addr.
func (c *CPU) Load64(mem Memory, addr uint64) (uint64, error) {
	v, _, err := c.load64(mem, addr)
	return v, err
}

// Store64 writes v at addr, breaking copy-on-write as a user store does.
func (c *CPU) Store64(mem Memory, addr, v uint64) error {
	_, err := c.store64(mem, addr, v)
	return err
}
