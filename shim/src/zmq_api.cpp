#include "zmq_api.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "log.hpp"

namespace metronome::shim {
namespace {

int Anchor() {
  return 1;
}

template <class T>
bool Bind(void* h, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(h, name));
  return out != nullptr;
}

ZmqApi* Load() {
  static ZmqApi api;
  // 1. Beside the shim (self-contained install). 2. The system's.
  constexpr char kLibzmq[] = "libzmq.so.5";
  char path[512] = {};
  Dl_info self{};
  void* h = nullptr;
  if (dladdr(reinterpret_cast<void*>(&Anchor), &self) != 0 && self.dli_fname != nullptr) {
    std::strncpy(path, self.dli_fname, sizeof(path) - 32);
    char* slash = std::strrchr(path, '/');
    if (slash != nullptr) {
      std::memcpy(slash + 1, kLibzmq, sizeof(kLibzmq));  // fits: strncpy left 32 bytes
      if (access(path, R_OK) == 0) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (h == nullptr) {
    std::memcpy(path, kLibzmq, sizeof(kLibzmq));
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  if (h == nullptr) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc keeps dlerror's message per thread.
    const char* err = dlerror();
    MLOG_ERROR("libzmq.so.5 cannot be loaded (%s): no scheduler connection, running ungated",
               err ? err : "?");
    return nullptr;
  }
  bool ok = Bind(h, "zmq_ctx_new", api.ctx_new) && Bind(h, "zmq_ctx_term", api.ctx_term) &&
            Bind(h, "zmq_ctx_set", api.ctx_set) && Bind(h, "zmq_socket", api.socket) &&
            Bind(h, "zmq_close", api.close) && Bind(h, "zmq_setsockopt", api.setsockopt) &&
            Bind(h, "zmq_getsockopt", api.getsockopt) && Bind(h, "zmq_connect", api.connect) &&
            Bind(h, "zmq_send", api.send) && Bind(h, "zmq_recv", api.recv) &&
            Bind(h, "zmq_poll", api.poll) && Bind(h, "zmq_errno", api.errno_value) &&
            Bind(h, "zmq_strerror", api.strerror);
  Bind(h, "zmq_curve_keypair", api.curve_keypair);
  if (!ok) {
    MLOG_ERROR("libzmq at %s lacks a needed function: no scheduler connection", path);
    return nullptr;
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(api.ctx_new), &info) != 0 && info.dli_fname != nullptr) {
    std::strncpy(api.path, info.dli_fname, sizeof(api.path) - 1);
  }
  return &api;
}

}  // namespace

const ZmqApi* LoadZmq() noexcept {
  static std::once_flag once;
  static ZmqApi* api = nullptr;
  std::call_once(once, [] { api = Load(); });
  return api;
}

}  // namespace metronome::shim
