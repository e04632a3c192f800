// ZeroMQ, opened at run time. The shim has no link-time dependency on libzmq: it is loaded when
// the first communicator appears (a process that never uses NCCL never loads it), from the
// shim's own folder first (the self-contained install puts it there), else the system's.
// Only zmq.h's constants and types are used at compile time.
#pragma once

#include <zmq.h>

namespace metronome::shim {

struct ZmqApi {
  void* (*ctx_new)() = nullptr;
  int (*ctx_term)(void*) = nullptr;
  int (*ctx_set)(void*, int, int) = nullptr;
  void* (*socket)(void*, int) = nullptr;
  int (*close)(void*) = nullptr;
  int (*setsockopt)(void*, int, const void*, size_t) = nullptr;
  int (*getsockopt)(void*, int, void*, size_t*) = nullptr;
  int (*connect)(void*, const char*) = nullptr;
  int (*send)(void*, const void*, size_t, int) = nullptr;
  int (*recv)(void*, void*, size_t, int) = nullptr;
  int (*poll)(zmq_pollitem_t*, int, long) = nullptr;
  int (*errno_value)() = nullptr;
  const char* (*strerror)(int) = nullptr;
  int (*curve_keypair)(char*, char*) = nullptr;  // optional (libzmq built without CURVE)
  char path[512] = {};                           // where libzmq was loaded from
};

// Loads libzmq once; nullptr (and one log line) when it cannot be found.
const ZmqApi* LoadZmq() noexcept;

}  // namespace metronome::shim
