# FindNCCL: NCCL's header and library.
#   NCCL_ROOT / CUDAToolkit_ROOT / METRONOME_CUDA_HOME are searched first.
# Provides NCCL::headers (include path only: for code that must not link NCCL, like the shim or
# the CPU stand-in) and NCCL::nccl (the real libnccl.so.2), and NCCL_VERSION_CODE.
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_ROOT} ${METRONOME_CUDA_HOME} /usr/local/cuda /usr)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_code REGEX "^#define NCCL_VERSION_CODE [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" NCCL_VERSION_CODE "${_nccl_code}")
  math(EXPR _major "${NCCL_VERSION_CODE} / 10000")
  math(EXPR _minor "(${NCCL_VERSION_CODE} % 10000) / 100")
  math(EXPR _patch "${NCCL_VERSION_CODE} % 100")
  set(NCCL_VERSION "${_major}.${_minor}.${_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_INCLUDE_DIR NCCL_LIBRARY VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::headers)
  add_library(NCCL::headers INTERFACE IMPORTED)
  # nccl.h includes cuda_runtime.h and cuda_fp16.h: both live beside it in the toolkit.
  set_target_properties(NCCL::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  add_library(NCCL::nccl SHARED IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_LINK_LIBRARIES NCCL::headers)
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
