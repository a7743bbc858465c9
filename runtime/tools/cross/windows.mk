# make windows: see issue #28 (filled in by the Windows port)
