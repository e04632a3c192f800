# Included by the shim's install step (component "shim"). Copies libzmq.so.5 and every shared
# library it needs, except glibc's, beside libmetronome.so, and gives the copies RUNPATH $ORIGIN
# so that each resolves its own dependencies inside the folder.
#   in: METRONOME_BUNDLE_DIR, METRONOME_LIBZMQ_SO, METRONOME_PATCHELF (may be empty)
if(NOT METRONOME_LIBZMQ_SO OR NOT EXISTS "${METRONOME_LIBZMQ_SO}")
  message(WARNING "metronome: libzmq.so.5 not found: the shim bundle has no scheduler client")
  return()
endif()
set(_glibc "^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libmvec|libBrokenLocale)\\.so")
file(GET_RUNTIME_DEPENDENCIES
  LIBRARIES "${METRONOME_LIBZMQ_SO}"
  RESOLVED_DEPENDENCIES_VAR _deps
  UNRESOLVED_DEPENDENCIES_VAR _missing
  PRE_EXCLUDE_REGEXES "${_glibc}"
  POST_EXCLUDE_REGEXES ".*/${_glibc}")
if(_missing)
  message(WARNING "metronome: libzmq dependencies not found: ${_missing}")
endif()
foreach(_lib IN LISTS _deps ITEMS "${METRONOME_LIBZMQ_SO}")
  get_filename_component(_name "${_lib}" NAME)
  if(_name MATCHES "${_glibc}")
    continue()
  endif()
  get_filename_component(_real "${_lib}" REALPATH)
  message(STATUS "Bundling: ${METRONOME_BUNDLE_DIR}/${_name}")
  configure_file("${_real}" "${METRONOME_BUNDLE_DIR}/${_name}" COPYONLY)
  if(METRONOME_PATCHELF)
    execute_process(COMMAND "${METRONOME_PATCHELF}" --set-rpath "$ORIGIN"
                            "${METRONOME_BUNDLE_DIR}/${_name}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(WARNING "metronome: patchelf failed on ${_name}")
    endif()
  endif()
endforeach()
