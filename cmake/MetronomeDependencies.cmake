# Every third-party package the project uses, found in one place. scripts/setup.sh installs them.
find_package(Threads REQUIRED)
find_package(cppzmq REQUIRED)
find_package(msgpack REQUIRED CONFIG NAMES msgpack msgpackc-cxx)
find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(Gloo CONFIG)
if(METRONOME_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(METRONOME_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# cpp-httplib (Debian ships the header plus a compiled library, no CMake package), built with
# OpenSSL: its header declares OpenSSL types, and the scheduler's HTTPS sets up the SSL context.
find_package(OpenSSL REQUIRED)
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
find_library(HTTPLIB_LIBRARY NAMES cpp-httplib REQUIRED)
add_library(httplib::httplib UNKNOWN IMPORTED)
set_target_properties(httplib::httplib PROPERTIES
  IMPORTED_LOCATION "${HTTPLIB_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${HTTPLIB_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS "CPPHTTPLIB_OPENSSL_SUPPORT;CPPHTTPLIB_ZLIB_SUPPORT"
  INTERFACE_LINK_LIBRARIES "Threads::Threads;OpenSSL::SSL;OpenSSL::Crypto")

# CUDA: the toolkit headers and NCCL are needed; nvcc is optional (it only builds the device gate).
set(METRONOME_CUDA_HOME "/usr/local/cuda" CACHE PATH "CUDA Toolkit root")
if(NOT DEFINED CUDAToolkit_ROOT)
  set(CUDAToolkit_ROOT "${METRONOME_CUDA_HOME}")
endif()
find_package(CUDAToolkit)
find_package(NCCL REQUIRED)

include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS "${METRONOME_CUDA_HOME}/bin/nvcc")
  set(CMAKE_CUDA_COMPILER "${METRONOME_CUDA_HOME}/bin/nvcc")
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(METRONOME_HAVE_NVCC ON)
  message(STATUS "metronome: nvcc found (${CMAKE_CUDA_COMPILER}): the device gate kernel is built")
else()
  set(METRONOME_HAVE_NVCC OFF)
  message(STATUS "metronome: no nvcc: the device gate is left out; the shim uses its host gate only")
endif()
