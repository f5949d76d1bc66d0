# Entry points named in the README. `make run` and `make test` install the Debian packages
# on first use (apt-get, as root), configure and build.
BUILD ?= build
CMAKE_FLAGS ?=
DEPS_STAMP := $(BUILD)/.deps-installed
RUN_ARGS ?=

.PHONY: all deps build run test unit integration clean format install uninstall

all: build

$(DEPS_STAMP): scripts/install-deps.sh
	scripts/install-deps.sh
	mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

$(BUILD)/build.ninja: $(DEPS_STAMP) CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Foreground daemon on 127.0.0.1:53 and [::1]:53, forwarding to the resolvers in
# /etc/resolv.conf. Extra flags: make run RUN_ARGS="--upstream 192.0.2.53 --threads 2"
run: build
	$(BUILD)/nscache serve $(RUN_ARGS)

# The whole suite: GoogleTest unit tests and the integration tests (real daemon, NSD and a
# scriptable fake upstream on loopback).
test: build
	ctest --test-dir $(BUILD) --output-on-failure

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -L unit

integration: build
	ctest --test-dir $(BUILD) --output-on-failure -L integration

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

