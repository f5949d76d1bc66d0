# SPDX-License-Identifier: BSD-3-Clause
# Install rules: the daemon, the NSS module (in the multiarch library directory, where glibc's
# loader finds it), a default configuration that never overwrites an existing one, the systemd
# unit and the sysusers entry for its user. `make install` / `make uninstall` drive it; every
# file installed is listed in <build>/install_manifest.txt, which uninstall reads.
include(GNUInstallDirs)

# glibc dlopens libnss_<service>.so.2 through the standard library path, so the module goes
# to the multiarch directory whatever the prefix: /usr/lib/x86_64-linux-gnu on Debian.
if(NOT NSCACHE_NSS_LIBDIR)
  set(_multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT _multiarch)
    execute_process(COMMAND dpkg-architecture -qDEB_HOST_MULTIARCH OUTPUT_VARIABLE _multiarch
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_multiarch)
    set(_nss_libdir "/usr/lib/${_multiarch}")
  else()
    set(_nss_libdir "/usr/lib")
  endif()
  set(NSCACHE_NSS_LIBDIR "${_nss_libdir}" CACHE PATH "Where libnss_nscache.so.2 is installed")
endif()

# Where the systemd unit goes: PREFIX/lib/systemd/system unless set (Debian 12's debhelper
# wants /lib/systemd/system).
set(NSCACHE_SYSTEMD_UNIT_DIR "" CACHE PATH "Where nscache.service is installed (default: PREFIX/lib/systemd/system)")

install(TARGETS nscache RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS nss_nscache LIBRARY DESTINATION ${NSCACHE_NSS_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/docs/nss.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/nscache.toml.example DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/packaging/nscache.sysusers DESTINATION lib/sysusers.d
        RENAME nscache.conf)

# Everything below runs at install time, so it sees the prefix and DESTDIR of `cmake
# --install`, not of the configure step.
set(NSCACHE_UNIT_TEMPLATE ${CMAKE_SOURCE_DIR}/packaging/nscache.service.in)
set(NSCACHE_CONFIG_EXAMPLE ${CMAKE_SOURCE_DIR}/nscache.toml.example)
set(NSCACHE_INSTALL_STAGING ${CMAKE_BINARY_DIR}/install-staging)
install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(_destdir \"\$ENV{DESTDIR}\")

  # The unit names the daemon where this install put it.
  file(READ \"${NSCACHE_UNIT_TEMPLATE}\" _unit)
  string(REPLACE \"@BINDIR@\" \"\${_prefix}/${CMAKE_INSTALL_BINDIR}\" _unit \"\${_unit}\")
  string(REPLACE \"@DOCDIR@\" \"\${_prefix}/${CMAKE_INSTALL_DOCDIR}\" _unit \"\${_unit}\")
  file(WRITE \"${NSCACHE_INSTALL_STAGING}/nscache.service\" \"\${_unit}\")
  set(_unit_dir \"${NSCACHE_SYSTEMD_UNIT_DIR}\")
  if(_unit_dir STREQUAL \"\")
    set(_unit_dir \"\${_prefix}/lib/systemd/system\")
  endif()
  file(INSTALL \"${NSCACHE_INSTALL_STAGING}/nscache.service\"
       DESTINATION \"\${_unit_dir}\" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  # The DNS sockets systemd holds across restarts (socket activation).
  file(INSTALL \"${CMAKE_SOURCE_DIR}/packaging/nscache.socket\"
               \"${CMAKE_SOURCE_DIR}/packaging/nscache-tcp.socket\"
       DESTINATION \"\${_unit_dir}\" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

  # The default configuration, only where none exists: a local one is never overwritten.
  if(EXISTS \"\${_destdir}/etc/nscache/nscache.toml\")
    message(STATUS \"Keeping: \${_destdir}/etc/nscache/nscache.toml\")
  else()
    file(INSTALL \"${NSCACHE_CONFIG_EXAMPLE}\" DESTINATION \"/etc/nscache\"
         RENAME nscache.toml FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()

  # On the live system (no DESTDIR): the user, and the loader cache for the module.
  if(_destdir STREQUAL \"\")
    find_program(_sysusers systemd-sysusers)
    if(_sysusers)
      execute_process(COMMAND \"\${_sysusers}\" \"\${_prefix}/lib/sysusers.d/nscache.conf\")
    else()
      execute_process(COMMAND getent passwd nscache RESULT_VARIABLE _missing OUTPUT_QUIET)
      if(_missing)
        execute_process(COMMAND useradd --system --no-create-home --home-dir /nonexistent
                                --shell /usr/sbin/nologin nscache)
      endif()
    endif()
    find_program(_ldconfig ldconfig PATHS /sbin /usr/sbin)
    if(_ldconfig)
      execute_process(COMMAND \"\${_ldconfig}\")
    endif()
  endif()
")
