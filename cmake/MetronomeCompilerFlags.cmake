# Warnings and sanitizers. Warnings go on an interface target that our own targets link, so that
# third-party headers (included as SYSTEM) do not fail the build.
add_library(metronome_warnings INTERFACE)
target_compile_options(metronome_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                              -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wnull-dereference
                              -Wimplicit-fallthrough>)
if(METRONOME_WERROR)
  target_compile_options(metronome_warnings INTERFACE $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>)
endif()

if(METRONOME_SANITIZE)
  message(STATUS "metronome: building with -fsanitize=${METRONOME_SANITIZE}")
  add_compile_options(-fsanitize=${METRONOME_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${METRONOME_SANITIZE})
  add_compile_definitions(METRONOME_SANITIZED=1)
endif()
