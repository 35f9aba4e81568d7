# Cross build for aarch64 Linux with Debian's g++-aarch64-linux-gnu, run under qemu:
#
#   cmake -S . -B build-a64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DKFUSE_BUILD_BENCH=OFF
#   ninja -C build-a64 && ctest --test-dir build-a64 -L smoke
#
# Needs: apt-get install g++-aarch64-linux-gnu qemu-user-static.
# Binaries are linked statically, so qemu-aarch64-static runs them without an arm64 sysroot.
#
# The headers of xsimd, Highway, Catch2 and Eigen in /usr/include are architecture-independent,
# but /usr/include itself must not be on the cross include path (its glibc and <bits/...>
# headers are x86's): see the generated root below.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KFUSE_CROSS_TRIPLE aarch64-linux-gnu)
find_program(KFUSE_CROSS_CXX ${KFUSE_CROSS_TRIPLE}-g++ REQUIRED)
find_program(KFUSE_CROSS_CC ${KFUSE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KFUSE_CROSS_CXX})
if(KFUSE_CROSS_CC)
  set(CMAKE_C_COMPILER ${KFUSE_CROSS_CC})
endif()

find_program(KFUSE_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${KFUSE_QEMU_AARCH64})

# Static links: qemu-aarch64-static needs no arm64 loader or libraries then.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# Arch-independent header libraries and CMake package configs from the host, without the rest
# of /usr/include: a generated root, <build>/kfuse-cross-root/usr, with
#   include/{xsimd,hwy,catch2,eigen3,Eigen}   symlinks into /usr/include
#   lib/cmake/Catch2, share/eigen3/cmake       copies of the host's package configs (without
#                                              the per-configuration files of compiled libs)
# The configs compute their prefix from where they sit, so Catch2::Catch2 points at this root's
# include dir and never puts /usr/include on the cross include path (a symlinked config would
# resolve back to /usr).
set(KFUSE_CROSS_ROOT ${CMAKE_BINARY_DIR}/kfuse-cross-root)
set(_kfuse_usr ${KFUSE_CROSS_ROOT}/usr)
if(NOT EXISTS ${_kfuse_usr}/include)
  file(MAKE_DIRECTORY ${_kfuse_usr}/include)
  foreach(lib xsimd hwy catch2 eigen3)
    if(EXISTS /usr/include/${lib})
      file(CREATE_LINK /usr/include/${lib} ${_kfuse_usr}/include/${lib} SYMBOLIC)
    endif()
  endforeach()
  if(EXISTS /usr/include/eigen3/Eigen)  # <Eigen/Core> without -I.../eigen3 as well
    file(CREATE_LINK /usr/include/eigen3/Eigen ${_kfuse_usr}/include/Eigen SYMBOLIC)
  endif()
  foreach(cfg lib/cmake/Catch2 share/eigen3/cmake)
    if(EXISTS /usr/${cfg})
      file(GLOB _files /usr/${cfg}/*.cmake)
      # Per-configuration files name the host's compiled libraries (libCatch2WithMain.a, x86):
      # leave them out, the header-only targets need none.
      list(FILTER _files EXCLUDE REGEX "Targets-[a-z]+\\.cmake$")
      file(COPY ${_files} DESTINATION ${_kfuse_usr}/${cfg})
    endif()
  endforeach()
endif()
# Every target sees the headers through the standard include directories; the initial flags
# carry them too, for checks (check_include_file_cxx of xsimd and hwy) that only see flags.
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${_kfuse_usr}/include)
set(CMAKE_CXX_FLAGS_INIT "-isystem ${_kfuse_usr}/include")

# Programs from the host; libraries and headers from the cross sysroot; packages from the
# sysroot or the generated root (both re-rooted, so /usr/lib/cmake/Catch2 is found as
# <root>/usr/lib/cmake/Catch2).
set(CMAKE_FIND_ROOT_PATH /usr/${KFUSE_CROSS_TRIPLE} ${KFUSE_CROSS_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
