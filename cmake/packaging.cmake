# install() rules and CPack: npu-run .deb and .rpm, and a .tar.gz, for the architecture being
# built (x86_64 or aarch64, cross-built). scripts/release.sh builds both and collects dist/.
#   cmake --build BUILD --target package     (after configuring with -DNPU_RUN_STATIC=ON)
include(GNUInstallDirs)

# The man page and the bash and zsh completions come from the built binary itself (its --help
# texts and option tables), through the emulator when cross-building.
set(npu_run_runner ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:npu_run>)
set(man_page ${CMAKE_CURRENT_BINARY_DIR}/npu_run.1)
set(completion ${CMAKE_CURRENT_BINARY_DIR}/npu_run.bash-completion)
set(zsh_completion ${CMAKE_CURRENT_BINARY_DIR}/_npu_run)
find_program(NPU_RUN_HELP2MAN help2man)
if(NPU_RUN_HELP2MAN)
  add_custom_command(OUTPUT ${man_page}.gz
    COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/man_page.sh ${man_page}
            ${PROJECT_SOURCE_DIR}/docs/man/npu_run.h2m ${npu_run_runner}
    COMMAND gzip -9 -n -f ${man_page}
    DEPENDS npu_run ${PROJECT_SOURCE_DIR}/cmake/man_page.sh ${PROJECT_SOURCE_DIR}/docs/man/npu_run.h2m
    COMMENT "Writing the man page with help2man")
  add_custom_target(npu_run_man_page ALL DEPENDS ${man_page}.gz)
  install(FILES ${man_page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/install_deps.sh --release installs it)")
endif()
add_custom_command(OUTPUT ${completion} ${zsh_completion}
  COMMAND ${npu_run_runner} completion bash > ${completion}
  COMMAND ${npu_run_runner} completion zsh > ${zsh_completion}
  DEPENDS npu_run
  COMMENT "Writing the bash and zsh completions")
add_custom_target(npu_run_completion ALL DEPENDS ${completion} ${zsh_completion})

install(TARGETS npu_run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The modules workers may import (docs/guide/hangs-and-restarts.md, docs/guide/snapshots.md).
install(FILES python/npu_run_progress.py python/npu_run_checkpoint.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/npu_run/python)
install(FILES ${completion} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME npu_run)
# zsh's $fpath holds vendor-completions on Debian and Ubuntu, site-functions on CentOS, EulerOS,
# openEuler and Kylin: one package for all of them, so both.
foreach(folder vendor-completions site-functions)
  install(FILES ${zsh_completion} DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/${folder})
endforeach()
# /usr/share/doc/<package name>, with its copyright file (Debian policy 12.5).
install(FILES README.md docs/ERRORS.md docs/HARDENING.md packaging/copyright
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/npu-run)
install(DIRECTORY docs/guide DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/npu-run)

# Architecture names: the kernel's and RPM's, and Debian's.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(npu_run_arch aarch64)
  set(npu_run_deb_arch arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(npu_run_arch x86_64)
  set(npu_run_deb_arch amd64)
else()
  set(npu_run_arch ${CMAKE_SYSTEM_PROCESSOR})
  set(npu_run_deb_arch ${CMAKE_SYSTEM_PROCESSOR})
endif()

set(NPU_RUN_PACKAGE_CONTACT "npu_run developers <npu-run@localhost>" CACHE STRING
    "Maintainer named in the .deb and .rpm")
set(CPACK_PACKAGE_NAME npu-run)  # Debian and RPM package names take '-', not '_'
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "npu_run")
set(CPACK_PACKAGE_CONTACT ${NPU_RUN_PACKAGE_CONTACT})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Launcher for multi-process distributed training on Ascend NPUs, GPUs and CPUs")
set(CPACK_PACKAGE_DESCRIPTION
    "npu_run starts one worker per device on each node with the environment of torchrun and of \
the Ascend launch scripts, supervises them, and stops every worker of every node when one fails. \
One static binary: it runs on any Linux from 3.10 and needs no Python.")
set(CPACK_GENERATOR TGZ DEB RPM)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_FILE_NAME npu_run-${PROJECT_VERSION}-linux-${npu_run_arch})  # the .tar.gz
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # npu-run_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${npu_run_deb_arch})
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Static: no shared library to depend on.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)

set(CPACK_RPM_FILE_NAME RPM-DEFAULT)  # npu-run-<version>-1.<arch>.rpm
set(CPACK_RPM_PACKAGE_ARCHITECTURE ${npu_run_arch})
set(CPACK_RPM_PACKAGE_LICENSE "Unspecified")  # see packaging/copyright
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_AUTOREQPROV OFF)
# The directories every system already owns must not be claimed by this package.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /usr/share/man /usr/share/man/man1 /usr/share/bash-completion
    /usr/share/bash-completion/completions /usr/share/doc /usr/share/zsh
    /usr/share/zsh/vendor-completions /usr/share/zsh/site-functions)
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")

include(CPack)
