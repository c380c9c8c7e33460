"""The execution side: OpenCL devices, device arrays, executables and their buffers, and the
on-disk kernel caches. Nothing here knows HLO beyond shapes and the lowered plan."""
