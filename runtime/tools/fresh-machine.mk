# make fresh-machine-test: the committed tree (HEAD) built and tested on a
# new Debian 12 machine: a chroot into a minimal bookworm root (debootstrap
# --variant=minbase, kept in ~/.cache/luamcp/fresh-root and copied for each
# run) with a clone of HEAD and no ../shared, where only make is installed
# before `make`, `make run </dev/null` and `make test`. A missing install
# step shows there, not here, where the packages are already installed.
# Needs root; logs in build/fresh-machine/. FRESH_KEEP=1 keeps the scratch
# root, FRESH_REUSE_CACHE=1 starts with the last run's ~/.cache/luamcp,
# FRESH_NO_TEST=1 stops after make run (runtime/tools/fresh-machine.sh).

.PHONY: fresh-machine-test
fresh-machine-test:
	runtime/tools/fresh-machine.sh
