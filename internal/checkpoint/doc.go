// Package checkpoint stores small state files atomically and with a checksum,
// for the components of a node agent that must find their state again after
// a crash or a reboot (persisted pod sets, CPU and memory manager state).
//
// Write puts the bytes in a temporary file in the same directory, syncs it,
// renames it over the old file and syncs the directory, so a reader sees
// either the old complete file or the new complete file. Each file starts
// with a 16-byte header (magic, length, CRC-32C of the payload); Read
// verifies it and returns ErrCorrupt for anything that does not match.
// SetAside moves a corrupt file out of the way so the caller can start from
// scratch instead of refusing to start:
//
//	data, err := checkpoint.Read(dir, "cpu_manager_state")
//	if errors.Is(err, checkpoint.ErrCorrupt) {
//		moved, _ := checkpoint.SetAside(dir, "cpu_manager_state")
//		log.Warn("corrupt checkpoint set aside", zap.String("path", moved))
//	}
//
// WritePlain writes the same way without the header, for a file in
// another program's format (the reader then checks what it reads;
// OS.ReadFileMax reads such a file under a size limit of its own).
//
// The file system calls go through the small FS interface; OS is the real
// one, and tests substitute a failing one to simulate a crash at each step.
package checkpoint
