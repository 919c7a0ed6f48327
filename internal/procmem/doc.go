// Package procmem reads a process's memory from /proc/<pid>/status: its
// resident set (VmRSS) and its peak (VmHWM), the anonymous part of it (RssAnon: heap, stacks,
// written data pages), the file-backed part (RssFile: the binary's code
// and read-only pages, which the kernel can drop and read again) and its
// thread count. The memory measurements (hack/churn, hack/soak,
// hack/simbench, hack/footprint, hack/e2ebench, the e2e churn test and
// examples/simulate's report) read it through this one parser.
//
//	st, err := procmem.Read(pid)     // or procmem.ReadSelf()
//	fmt.Println(st.RSS, st.Anon)     // bytes
//	st, err = procmem.Parse(reader)  // any status text
//
// A status without a VmRSS line (a kernel thread, a zombie) fails with
// ErrNoRSS; a field whose value is not a number of kB fails with
// ErrBadField.
package procmem
