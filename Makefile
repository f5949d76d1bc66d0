# SPDX-License-Identifier: BSD-3-Clause
# Conveniences over scripts/: the README's commands are scripts/run and scripts/test, which
# need nothing but bash on a fresh Debian machine (they install the rest, make included).
BUILD ?= build
CMAKE_FLAGS ?=
RUN_ARGS ?=
export BUILD CMAKE_FLAGS

.PHONY: all build run test unit integration clean format install uninstall deb deb-test

all: build

build:
	scripts/build

# Foreground daemon; extra flags: make run RUN_ARGS="--upstream 192.0.2.53 --threads 2"
run:
	scripts/run $(RUN_ARGS)

test:
	scripts/test

unit:
	scripts/test -L unit

integration:
	scripts/test -L integration

$(BUILD)/build.ninja:
	scripts/build

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD)

# Installs the daemon (PREFIX/bin), the NSS module (/usr/lib/<multiarch>), the default
# /etc/nscache/nscache.toml (kept if present), the systemd unit and the sysusers entry.
# DESTDIR stages the files elsewhere: make install DESTDIR=/tmp/stage
PREFIX ?= /usr/local
DESTDIR ?=
# NO_BUILD=1 installs what is built without running ninja (the install test does, so it never
# relinks a binary other tests are running).
NO_BUILD ?=
install: | $(BUILD)/build.ninja
	@if [ -z "$(NO_BUILD)" ]; then ninja -C $(BUILD) nscache nss_nscache; fi
	packaging/install.sh $(BUILD) $(PREFIX) $(DESTDIR)

# Removes exactly what `make install` put in place (the same DESTDIR, if one was used).
uninstall:
	packaging/uninstall.sh $(BUILD) $(DESTDIR)


# Debian packages nscache and libnss-nscache (dpkg-buildpackage -b -us -uc on a clean copy of
# the tree: scripts/build-deb) into DEB_OUT; deb-test builds them and checks them with lintian
# and an install, run, remove and purge in a throwaway root (tests/package/test_deb.py).
DEB_OUT ?= dist
deb:
	scripts/build-deb $(DEB_OUT)

deb-test: deb
	NSCACHE_DEB_DIR=$(abspath $(DEB_OUT)) /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/package
