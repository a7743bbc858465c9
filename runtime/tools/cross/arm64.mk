# make linux-arm64: see issue #28 (filled in by the arm64 build)
